// Command loadgen is livereg's stress test: it hammers an in-process
// catalog with parallel calls, prompt gets, templated reads, listings,
// starts and stops of tools, prompts and resource templates while
// consumers die in every way ADR-0068 names (clean stop, context cancel,
// panic in the route body, drop without stop), checks the ADR's invariants
// (twenty, listed in package cmd/internal/loadgen/inproc) as it runs, and
// reports throughput, latency percentiles and violations.
//
// Usage:
//
//	loadgen [-duration 10s | -ops N] [-resolvers N] [-consumers N] [-names K]
//	        [-cap N] [-mix k=v,...] [-seed N] [-json FILE] [-mcp [-target URL]]
//
// With -fleet N it runs N replicas of a fleet in one process instead, over
// an embedded etcd or a real cluster (-etcd URL), while replicas crash and
// lose their sessions, and checks the fleet's twelve invariants, sixteen
// counted checks (package cmd/internal/loadgen/fleet; run loadgen -fleet 3
// -h for its flags).
//
// Exit status: 0 when no invariant was violated and no error seen, 1 with
// the violations listed, 2 for bad flags, 3 when interrupted before the
// end with no violation so far (the report says INCOMPLETE, never PASS).
// Run loadgen -h for every flag; package cmd/internal/loadgen maps the
// code.
package main

import (
	"os"

	"github.com/livereg/livereg/cmd/internal/loadgen"
)

func main() {
	os.Exit(loadgen.Main(os.Args[1:], os.Stdout, os.Stderr))
}
