package fleetload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// Main is cmd/loadgen with -fleet: it parses args, runs, prints the report
// to stdout (and JSON where -json says), and returns the exit codes of
// both modes (package internal/loadgen/report). SIGINT and SIGTERM end the run early; it still reports.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return report.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n%s\nrun 'loadgen -fleet 3 -h' for every flag\n", err, UsageLine)
		return report.ExitUsage
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() | 1
	}
	ctx, stop := report.Interruptible(context.Background()) // a second signal kills the process
	defer stop()
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return report.ExitViolations
	}
	rep.WriteText(stdout)
	if cfg.JSONPath != "" {
		if err := report.WriteJSONFile(cfg.JSONPath, rep, stdout); err != nil {
			fmt.Fprintf(stderr, "loadgen: -json: %v\n", err)
			return report.ExitViolations
		}
	}
	return exitCode(rep)
}

func exitCode(r *Report) int { return r.verdict().ExitCode() }
