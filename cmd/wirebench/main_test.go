package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the server processes the load
// starts (it starts its own executable with -serve).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-serve" {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// One short round against four servers: a line per run in go test
// -bench form, with every metric, for every workload and server, but no
// listing of livereg-forward's, which serves calls only.
func TestOneRound(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-rounds", "1", "-duration", "150ms", "-warmup", "20ms", "-list-tools", "30",
		"-servers", "floor,livereg,livereg-forward,mcp-go-stateless", "-pin=false"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 15 || strings.Contains(out.String(), "WireList/impl=livereg-forward") {
		t.Fatalf("%d result lines, want 15, no listing of livereg-forward:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 9 || f[1] == "0" {
			t.Errorf("result line %q: want a name, a count above 0 and 7 metrics", l)
		}
		for _, unit := range []string{"ns/op", "p50-ns", "p99-ns", "cpu-ns/op", "B/op", "allocs/op", "rss-MiB"} {
			if !strings.Contains(l, " "+unit) {
				t.Errorf("result line %q has no %s", l, unit)
			}
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "PASS") {
		t.Errorf("the output does not end in PASS")
	}
}

func TestParse(t *testing.T) {
	for _, args := range [][]string{{"-servers", "nosuch"}, {"-rounds", "0"}, {"-duration", "-1s"}, {"-gogc", "x"}, {"-gogc", "0"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted it", args)
		}
	}
	cfg, err := parse(nil, io.Discard)
	if err != nil || len(cfg.servers) != 8 || len(cfg.workloads()) != 4 {
		t.Errorf("parse(nil) = %+v, %v", cfg, err)
	}
}

func TestProcReaders(t *testing.T) {
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if rss, err := procPeakRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("procPeakRSS = %d, %v", rss, err)
	}
}
