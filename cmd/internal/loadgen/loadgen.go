// Package loadgen is cmd/loadgen: one command line (package cli) and one
// load phase (package runner) over two worlds that load a livereg catalog
// and check ADR-0068's invariants while consumers die. The worlds share
// their common flags (cli), their checks' tally (invariant), latency
// histograms (latency), report head, findings, verdict and JSON (report),
// their MCP clients' credential (bearer) and bounded waits (wait):
//
//   - inproc, the default: one in-process catalog (and, with -mcp, an MCP
//     client beside it), twenty invariants;
//   - fleet, with -fleet N: N replicas of a fleet over etcd in one
//     process, while replicas crash and lose their sessions, eight
//     invariants counted as twelve checks.
//
// Each world's package documents its workload and every invariant, and
// how each is checked.
package loadgen

import (
	"fmt"
	"io"
	"slices"

	"github.com/livereg/livereg/cmd/internal/loadgen/fleet"
	"github.com/livereg/livereg/cmd/internal/loadgen/inproc"
)

// Main runs cmd/loadgen on args and returns its exit status (package
// report): -fleet N with N other than 0 is a fleet run (a bad N is
// reported by the fleet's flag parser), -fleet 0 or none the in-process
// one on the other arguments.
func Main(args []string, stdout, stderr io.Writer) int {
	n, rest, ok := fleet.FleetArg(args)
	if ok && n != 0 {
		return fleet.Main(args, stdout, stderr)
	}
	code := inproc.Main(rest, stdout, stderr)
	if slices.ContainsFunc(rest, isHelp) {
		fmt.Fprintln(stdout, "  -fleet N\n    \trun N replicas of a fleet over etcd instead (run 'loadgen -fleet 3 -h' for its flags)")
	}
	return code
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }
