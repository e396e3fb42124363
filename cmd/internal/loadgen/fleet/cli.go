package fleet

import (
	"context"
	"io"

	"github.com/livereg/livereg/cmd/internal/loadgen/cli"
)

// Main is cmd/loadgen with -fleet, run by the command line both worlds
// share (package cli): it parses args, runs, prints the report to stdout
// (and JSON where -json says), and returns the exit code (package report).
// SIGINT and SIGTERM end the run early; it still reports.
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Main(World, args, stdout, stderr)
}

// World is the fleet world as the shared command line runs it.
var World = cli.World[Config, *Report]{
	Help:   "loadgen -fleet 3 -h",
	Usage:  UsageLine,
	Parse:  ParseArgs,
	Common: func(cfg *Config) *cli.Common { return &cfg.Common },
	Run:    func(ctx context.Context, cfg Config, _ io.Writer) (*Report, error) { return Run(ctx, cfg) },
}
