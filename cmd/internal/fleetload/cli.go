package fleetload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"

	"github.com/livereg/livereg/internal/loadgen"
)

// Main is cmd/loadgen with -fleet: it parses args, runs, prints the report
// to stdout (and JSON where -json says), and returns internal/loadgen's
// exit codes. SIGINT and SIGTERM end the run early; it still reports.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return loadgen.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n%s\nrun 'loadgen -fleet 3 -h' for every flag\n", err, UsageLine)
		return loadgen.ExitUsage
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() | 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return loadgen.ExitViolations
	}
	rep.WriteText(stdout)
	if cfg.JSONPath != "" {
		if err := writeJSONFile(cfg.JSONPath, rep, stdout); err != nil {
			fmt.Fprintf(stderr, "loadgen: -json: %v\n", err)
			return loadgen.ExitViolations
		}
	}
	return exitCode(rep)
}

func exitCode(r *Report) int {
	switch {
	case r.Failed():
		return loadgen.ExitViolations
	case r.Interrupted:
		return loadgen.ExitIncomplete
	}
	return loadgen.ExitOK
}

func writeJSONFile(path string, rep *Report, stdout io.Writer) error {
	if path == "-" {
		return rep.WriteJSON(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
