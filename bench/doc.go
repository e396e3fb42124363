// Package bench holds the implementations that livereg is measured against
// and the benchmark suite that measures them side by side, in one run on
// one machine. All of it is test code: the package exports nothing, and the
// library's importers never compile it. Run it with go test -bench (make
// bench, make bench-quick); cmd/benchreport turns the results into the
// goals table and chart.
//
// Every registry here implements Registry (impl_test.go) with the semantics of
// ADR-0068: a live duplicate is refused, a dead one is replaced in place,
// unregister is owner-conditional, the cap reclaims dead entries before it
// refuses, and listings hide dead and not-ready entries, sorted by name. The
// shared conformance test runs the ADR scenarios against each of them, so
// that a baseline cannot win by skipping work the real one does. The
// floors (Floors, PlanFloors in floor_test.go) are not registries: they do a bare lookup
// with no owner check and exist only to show what a lookup costs at best.
//
// The wire benchmarks (wire_bench_test.go) measure what a client of a
// server feels: tools/call of one tool and tools/list of 1,000 over
// streamable HTTP on loopback, from one raw client, against livereg's
// mcpserve, a bare go-sdk server, a bare mcp-go server and a plain
// net/http JSON-RPC floor, in the same run, with p50 and p99 from an HDR
// histogram.
package bench
