// Command benchreport turns a results file of the bench suite into the README's
// performance section: a Markdown table of livereg's ratios against every
// other implementation, per workload and -cpu, with the performance goals judged,
// and an SVG chart of ns/op by implementation and -cpu.
//
//	(cd cmd && go build -o ../bin/benchreport ./benchreport)
//	bin/benchreport -in bench/results/latest.txt \
//		-md bench/results/table.md -svg bench/results/chart.svg
//
// It lives in the cmd module, beside the other tools, so that the core
// module holds only the library; make bench and make bench-quick build it
// into bin/ and run it from the repository root, where its default -in
// points.
//
// It reads the standard Go benchmark format and takes medians, as benchstat
// does; benchmarks whose names have no impl= part are ignored.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "bench/results/latest.txt", "results file in the Go benchmark format")
	md := flag.String("md", "", "write the Markdown table here (default: standard output)")
	svg := flag.String("svg", "", "write the SVG chart here (default: no chart)")
	command := flag.String("cmd", "", "the command that produced the results, quoted in the table")
	flag.Parse()
	if err := run(*in, *md, *svg, *command); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(in, md, svg, command string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(r.samples) == 0 {
		return fmt.Errorf("%s: no benchmark results with an impl= part", in)
	}
	var out bytes.Buffer
	if err := writeMarkdown(&out, r, command); err != nil {
		return err
	}
	if md == "" {
		_, err = os.Stdout.Write(out.Bytes())
	} else {
		err = os.WriteFile(md, out.Bytes(), 0o644)
	}
	if err != nil || svg == "" {
		return err
	}
	out.Reset()
	if err := writeSVG(&out, r); err != nil {
		return err
	}
	return os.WriteFile(svg, out.Bytes(), 0o644)
}
