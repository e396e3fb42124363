// Command loadgen is livereg's stress test: it hammers an in-process
// catalog with parallel calls, prompt gets, templated reads, listings,
// starts and stops of tools, prompts and resource templates while
// consumers die in every way ADR-0068 names (clean stop, context cancel,
// panic in the route body, drop without stop), checks the ADR's invariants
// (sixteen, listed in package cmd/internal/loadgen) as it runs, and reports
// throughput, latency percentiles and violations.
//
// Usage:
//
//	loadgen [-duration 10s | -ops N] [-resolvers N] [-consumers N] [-names K]
//	        [-cap N] [-mix k=v,...] [-seed N] [-json FILE] [-mcp [-target URL]]
//
// With -fleet N it runs N replicas of a fleet in one process instead, over
// an embedded etcd or a real cluster (-etcd URL), while replicas crash and
// lose their sessions, and checks the fleet's eight invariants, twelve
// counted checks (package cmd/internal/fleetload; run loadgen -fleet 3 -h
// for its flags).
//
// Exit status: 0 when no invariant was violated and no error seen, 1 with
// the violations listed, 2 for bad flags, 3 when interrupted before the
// end with no violation so far (the report says INCOMPLETE, never PASS).
// Run loadgen -h for every flag; package cmd/internal/loadgen documents
// the invariants and how each is checked.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/livereg/livereg/cmd/internal/fleetload"
	"github.com/livereg/livereg/cmd/internal/loadgen"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches: -fleet N with N other than 0 is a fleet run (a bad N is
// reported by its flag parser), -fleet 0 or none the single-process one.
func run(args []string) int {
	n, rest, ok := fleetload.FleetArg(args)
	if ok && n != 0 {
		return fleetload.Main(args, os.Stdout, os.Stderr)
	}
	code := loadgen.Main(rest, os.Stdout, os.Stderr)
	if slices.ContainsFunc(rest, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }) {
		fmt.Println("  -fleet N\n    \trun N replicas of a fleet over etcd instead (run 'loadgen -fleet 3 -h' for its flags)")
	}
	return code
}
