package inproc

import (
	"context"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/livereg/livereg/cmd/internal/loadgen/cli"
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

// Main is cmd/loadgen without -fleet, run by the command line both worlds
// share (package cli): it parses args, runs, prints the report to stdout
// (and JSON where -json says), and returns the exit code. SIGINT and
// SIGTERM end the run early; it still reports. A second signal kills the
// process. While stderr is a terminal, a progress line is drawn there.
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Main(World, args, stdout, stderr)
}

// World is the in-process world as the shared command line runs it.
var World = cli.World[Config, *Report]{
	Help:   "loadgen -h",
	Usage:  UsageLine,
	Parse:  ParseArgs,
	Common: func(cfg *Config) *cli.Common { return &cfg.Common },
	Run: func(ctx context.Context, cfg Config, stderr io.Writer) (*Report, error) {
		var opts RunOptions
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			opts.Progress = stderr
		}
		sys, cleanup, err := newSystem(ctx, cfg, &opts)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		return Run(ctx, cfg, sys, opts), nil
	},
}

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
