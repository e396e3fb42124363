package loadgen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"golang.org/x/term"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// Exit codes of Main.
const (
	ExitOK         = report.ExitOK         // no violations and no errors
	ExitViolations = report.ExitViolations // violations or errors, listed in the report
	ExitUsage      = report.ExitUsage      // bad flags
	// ExitIncomplete: interrupted (SIGINT, SIGTERM) before the run's
	// duration, with no violation seen so far. Not a pass: the run did not
	// do what was asked, and a script must not take it for one.
	ExitIncomplete = report.ExitIncomplete
)

// Main is cmd/loadgen: it parses args, runs, prints the report to stdout
// (and JSON where -json says), and returns the exit code. SIGINT and
// SIGTERM end the run early; it still reports. A second signal kills the
// process.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n%s\nrun 'loadgen -h' for every flag\n", err, UsageLine)
		return ExitUsage
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() | 1 // never 0, so that the report's seed reproduces the run
	}

	ctx, stop := report.Interruptible(context.Background()) // a second Ctrl-C quits at once
	defer stop()

	var opts RunOptions
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = stderr
	}
	sys, cleanup, err := newSystem(ctx, cfg, &opts)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return ExitViolations
	}
	rep := Run(ctx, cfg, sys, opts)
	cleanup()

	rep.WriteText(stdout)
	if cfg.JSONPath != "" {
		if err := report.WriteJSONFile(cfg.JSONPath, rep, stdout); err != nil {
			fmt.Fprintf(stderr, "loadgen: -json: %v\n", err)
			return ExitViolations
		}
	}
	return exitCode(rep)
}

// exitCode is the exit status a report calls for: violations win over an
// interruption, which is never a pass.
func exitCode(r *Report) int { return r.verdict().ExitCode() }

// newSystem builds what the run drives: the in-process catalog and, with
// -mcp, the MCP client beside it. Tests replace it to drive a broken
// system through Main.
var newSystem = func(_ context.Context, cfg Config, opts *RunOptions) (System, func(), error) {
	sys, err := NewCatalogSystem(cfg)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.Target != "":
		opts.mcp = &mcpDriver{target: cfg.Target, protocol: cfg.Protocol}
	case cfg.MCP:
		opts.mcp = &mcpDriver{cat: sys.Cat, protocol: cfg.Protocol}
	}
	return sys, func() {}, nil
}
