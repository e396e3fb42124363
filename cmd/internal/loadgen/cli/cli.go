// Package cli is the command line both loadgen worlds share, the
// in-process one (package inproc) and the fleet one (package fleet):
// parse the world's flags, draw a seed when none was given, run until the
// duration ends or a signal comes, print the report, write its JSON where
// -json says, and exit with the status its verdict calls for (package
// report). Each world brings only its flags and its run.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// A Result is a finished run's report: its text, the verdict that decides
// the exit status, and itself as -json writes it (encoding/json).
type Result interface {
	WriteText(out io.Writer)
	Verdict() report.Verdict
}

// World is what one world gives the command line: C is its parsed flags,
// R its report.
type World[C any, R Result] struct {
	// Help is the command that lists every flag, named after a flag error.
	Help string
	// Usage is the usage line printed with every flag error.
	Usage string
	// Parse reads args into a config; it returns flag.ErrHelp after -h,
	// having written the help to stdout.
	Parse func(args []string, stdout io.Writer) (C, error)
	// Common returns cfg's common settings: its seed (0 there means "draw
	// one") and where it asks for the JSON report ("" for nowhere, "-" for
	// stdout).
	Common func(cfg *C) *Common
	// Run runs the load until ctx ends or the config's duration is done;
	// an error means the run could not start, and there is no report.
	Run func(ctx context.Context, cfg C, stderr io.Writer) (R, error)
}

// Main is cmd/loadgen in world w: it parses args, runs, prints the report
// to stdout (and JSON where the config says), and returns the exit code
// (report.ExitOK and its siblings). SIGINT and SIGTERM end the run early;
// it still reports. A second signal kills the process.
func Main[C any, R Result](w World[C, R], args []string, stdout, stderr io.Writer) int {
	cfg, err := w.Parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return report.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n%s\nrun '%s' for every flag\n", err, w.Usage, w.Help)
		return report.ExitUsage
	}
	if c := w.Common(&cfg); c.Seed == 0 {
		c.Seed = rand.Uint64() | 1 // never 0, so that the report's seed reproduces the run
	}

	ctx, stop := report.Interruptible(context.Background()) // a second signal kills the process
	defer stop()
	rep, err := w.Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return report.ExitViolations
	}
	rep.WriteText(stdout)
	if path := w.Common(&cfg).JSONPath; path != "" {
		if err := report.WriteJSONFile(path, rep, stdout); err != nil {
			fmt.Fprintf(stderr, "loadgen: -json: %v\n", err)
			return report.ExitViolations
		}
	}
	return rep.Verdict().ExitCode()
}
