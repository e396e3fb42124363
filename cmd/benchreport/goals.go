package main

// side names one cell of a goal's ratio; impl and workload are fixed, the
// -cpu comes from the goal.
type side struct{ workload, impl string }

// goal is one of the performance goals (bench/README.md), measured as a ratio of medians
// from one run: num / den in unit, compared with limit. A goal with no den
// compares num's own median (an allocation count). A goal with cmp ""
// is reported without a verdict.
type goal struct {
	text     string
	num, den side
	unit     string
	cmp      string // "<=", ">=" or ""
	limit    float64
	cpus     []int // the -cpu values it is judged at; nil for every one in the file
	denCPU   int   // den's -cpu, when it is not the goal's (scaling goals); 0 otherwise
	diff     bool  // the value is num - den in unit, not num / den (a latency added)
}

const (
	nsOp     = "ns/op"
	allocsOp = "allocs/op"
)

// dispatchPublic is the trivial-handler, public-plan dispatch workload.
const dispatchPublic = "Dispatch/plan=public"

// goals are the performance goals, in the order table.md shows them.
var goals = []goal{
	{text: "Resolve hit, 10,000 entries: livereg at most 1.3x the raw xsync.MapOf.Load floor",
		num: side{"ResolveHit/n=10000", "livereg"}, den: side{"ResolveHit/n=10000", "floor-xsync"},
		unit: nsOp, cmp: "<=", limit: 1.3},
	{text: "Resolve hit, 10,000 entries: livereg at most 1.5x the unsynchronised map at -cpu 1",
		num: side{"ResolveHit/n=10000", "livereg"}, den: side{"ResolveHit/n=10000", "floor-map"},
		unit: nsOp, cmp: "<=", limit: 1.5, cpus: []int{1}},
	{text: "Resolve hit, 10,000 entries: livereg at least 4x faster than the RWMutex map at -cpu 2 (rwmutex time / livereg time)",
		num: side{"ResolveHit/n=10000", "rwmutex"}, den: side{"ResolveHit/n=10000", "livereg"},
		unit: nsOp, cmp: ">=", limit: 4, cpus: []int{2}},
	{text: "Resolve hit, 10,000 entries: 0 allocs/op",
		num: side{"ResolveHit/n=10000", "livereg"}, unit: allocsOp, cmp: "<=", limit: 0},
	{text: "Resolve hit, 128 entries: at least 20x faster than the reference design",
		num: side{"ResolveHit/n=128", "reference"}, den: side{"ResolveHit/n=128", "livereg"},
		unit: nsOp, cmp: ">=", limit: 20},
	{text: "Register at full cap, 10,000 entries: at least 50x faster than the reference design",
		num: side{"RegisterFullCap/cap=10000", "reference"}, den: side{"RegisterFullCap/cap=10000", "livereg"},
		unit: nsOp, cmp: ">=", limit: 50},
	{text: "Register at full cap, all owners live: cap 100,000 within 1.3x of cap 128",
		num: side{"RegisterFullCap/cap=100000", "livereg"}, den: side{"RegisterFullCap/cap=128", "livereg"},
		unit: nsOp, cmp: "<=", limit: 1.3},
	{text: "Mixed 90/5/5 at -cpu 2: livereg throughput at least the RWMutex map's (rwmutex time / livereg time)",
		num: side{"Mixed/mix=90-5-5/n=10000", "rwmutex"}, den: side{"Mixed/mix=90-5-5/n=10000", "livereg"},
		unit: nsOp, cmp: ">=", limit: 1, cpus: []int{2}},
	{text: "Mixed 90/5/5 at -cpu 2: livereg at least 2x the RWMutex map's throughput (rwmutex time / livereg time)",
		num: side{"Mixed/mix=90-5-5/n=10000", "rwmutex"}, den: side{"Mixed/mix=90-5-5/n=10000", "livereg"},
		unit: nsOp, cmp: ">=", limit: 2, cpus: []int{2}},
	{text: "Mixed 90/5/5: livereg time per op at -cpu 2 at most 0.6x that at -cpu 1",
		num: side{"Mixed/mix=90-5-5/n=10000", "livereg"}, den: side{"Mixed/mix=90-5-5/n=10000", "livereg"},
		unit: nsOp, cmp: "<=", limit: 0.6, cpus: []int{2}, denCPU: 1},
	{text: "RestartStorm: livereg time per op at -cpu 2 no more than at -cpu 1",
		num: side{"RestartStorm/n=10000", "livereg"}, den: side{"RestartStorm/n=10000", "livereg"},
		unit: nsOp, cmp: "<=", limit: 1, cpus: []int{2}, denCPU: 1},
	{text: "Register at full cap 10,000 while unrelated owners die once per 1,000 registers, against no deaths (report only)",
		num: side{"RegisterFullCapUnrelatedDeaths/cap=10000/every=1000", "livereg"}, den: side{"RegisterFullCap/cap=10000", "livereg"},
		unit: nsOp},
	{text: "Register at full cap 10,000 while unrelated owners die once per 1,000 registers: at most 1.2x the time with no deaths",
		num: side{"RegisterFullCapUnrelatedDeaths/cap=10000/every=1000", "livereg"}, den: side{"RegisterFullCap/cap=10000", "livereg"},
		unit: nsOp, cmp: "<=", limit: 1.2},
	{text: "PlanFor, 128 routes: 0 allocs/op",
		num: side{"PlanFor/n=128", "livereg"}, unit: allocsOp, cmp: "<=", limit: 0},
	{text: "PlanFor, 10,000 routes: 0 allocs/op",
		num: side{"PlanFor/n=10000", "livereg"}, unit: allocsOp, cmp: "<=", limit: 0},
	{text: "PlanFor, 128 routes: within 1.3x of the raw map floor",
		num: side{"PlanFor/n=128", "livereg"}, den: side{"PlanFor/n=128", "floor-map"},
		unit: nsOp, cmp: "<=", limit: 1.3},
	{text: "PlanFor, 10,000 routes: within 1.3x of the raw map floor",
		num: side{"PlanFor/n=10000", "livereg"}, den: side{"PlanFor/n=10000", "floor-map"},
		unit: nsOp, cmp: "<=", limit: 1.3},
	{text: "Dispatch, trivial handler, public plan: CallTool at most 2x its own parts run inline (Lookup + PlanFor + liveness + handler) at -cpu 1",
		num: side{dispatchPublic, "livereg"}, den: side{dispatchPublic, "parts"},
		unit: nsOp, cmp: "<=", limit: 2, cpus: []int{1}},
	{text: "Dispatch, trivial handler, public plan: time per op at -cpu 2 at most 0.6x that at -cpu 1",
		num: side{dispatchPublic, "livereg"}, den: side{dispatchPublic, "livereg"},
		unit: nsOp, cmp: "<=", limit: 0.6, cpus: []int{2}, denCPU: 1},
	{text: "Dispatch, trivial handler, public plan: 0 allocs/op",
		num: side{dispatchPublic, "livereg"}, unit: allocsOp, cmp: "<=", limit: 0},
	{text: "A 50 ms body, 200 callers, default options: at least 0.95x the calls per second of the body run directly (direct time / livereg time)",
		num: side{"SlowBody/callers=200/body=50ms", "direct"}, den: side{"SlowBody/callers=200/body=50ms", "livereg"},
		unit: nsOp, cmp: ">=", limit: 0.95},
	{text: "A 50 ms body, 200 callers, default options: no call refused",
		num: side{"SlowBody/callers=200/body=50ms", "livereg"}, unit: "refused/op", cmp: "<=", limit: 0},
	{text: "tools/call end to end over the SDK's in-memory transport: mcpserve at most 1.1x the SDK's own AddTool",
		num: side{"SDKCall", "livereg"}, den: side{"SDKCall", "sdk"},
		unit: nsOp, cmp: "<=", limit: 1.1},
	{text: "tools/list of 1,000 tools end to end: mcpserve against the SDK's own AddTool (report only)",
		num: side{"SDKList/n=1000", "livereg"}, den: side{"SDKList/n=1000", "sdk"}, unit: nsOp},
	{text: "10,000 idle consumers: at most 2 KiB each, route data included",
		num: side{"Consumers/n=10000", "livereg"}, unit: "B/consumer", cmp: "<=", limit: 2048},
	{text: "10,000 idle consumers: no goroutine of their own",
		num: side{"Consumers/n=10000", "livereg"}, unit: "goroutines/consumer", cmp: "<=", limit: 0},
	{text: "tools/call of echo over streamable HTTP, 16 clients, stateful: livereg at least 1.2x mcp-go's calls per second (mcp-go time / livereg time)",
		num: side{wireCall16, "mcp-go"}, den: side{wireCall16, "livereg"}, unit: nsOp, cmp: ">=", limit: 1.2},
	{text: "tools/call of echo over streamable HTTP, 16 clients, stateless: livereg at least 1.2x mcp-go's calls per second",
		num: side{wireCall16, "mcp-go-stateless"}, den: side{wireCall16, "livereg-stateless"}, unit: nsOp, cmp: ">=", limit: 1.2},
	{text: "tools/call of echo over streamable HTTP, 128 clients, stateful: livereg's p99 at most mcp-go's",
		num: side{wireCall128, "livereg"}, den: side{wireCall128, "mcp-go"}, unit: "p99-ns", cmp: "<=", limit: 1},
	{text: "tools/call of echo over streamable HTTP, 128 clients, stateless: livereg's p99 at most mcp-go's",
		num: side{wireCall128, "livereg-stateless"}, den: side{wireCall128, "mcp-go-stateless"}, unit: "p99-ns", cmp: "<=", limit: 1},
	{text: "tools/call of echo over streamable HTTP, 16 clients: livereg's server CPU per call at most 2x the net/http floor's",
		num: side{wireCall16, "livereg"}, den: side{wireCall16, "floor"}, unit: "cpu-ns/op", cmp: "<=", limit: 2},
	{text: "tools/list of 1,000 tools over streamable HTTP: livereg at least 2x the go-sdk's with raw schemas (go-sdk time / livereg time)",
		num: side{"WireList", "go-sdk"}, den: side{"WireList", "livereg"}, unit: nsOp, cmp: ">=", limit: 2},
	{text: "tools/list of 1,000 tools over streamable HTTP: livereg at least 5x mcp-go's",
		num: side{"WireList", "mcp-go"}, den: side{"WireList", "livereg"}, unit: nsOp, cmp: ">=", limit: 5},
	{text: "tools/list of 1,000 tools over streamable HTTP: livereg's server CPU per listing over the go-sdk's (report only)",
		num: side{"WireList", "livereg"}, den: side{"WireList", "go-sdk"}, unit: "cpu-ns/op"},
	{text: "tools/call of echo forwarded by a replica to the one that holds it, one client: p50 at most 150 µs over a local call (livereg-forward - livereg-stateless)",
		num: side{wireCall1, "livereg-forward"}, den: side{wireCall1, "livereg-stateless"}, unit: "p50-ns", cmp: "<=", limit: 150e3, diff: true},
	{text: "tools/call of echo forwarded, one client: bytes allocated per call, both replicas' processes together, over a local call's (report only)",
		num: side{wireCall1, "livereg-forward"}, den: side{wireCall1, "livereg-stateless"}, unit: "B/op"},
}

// The wire workloads (cmd/wirebench).
const (
	wireCall1   = "WireCall/clients=1"
	wireCall16  = "WireCall/clients=16"
	wireCall128 = "WireCall/clients=128"
)

// verdict is one goal judged at one -cpu.
type verdict struct {
	goal  goal
	cpu   int
	value float64
	ok    bool // the data was there
	met   bool
}

// judge evaluates every goal at every -cpu it applies to that the file has.
func judge(r *results) []verdict {
	var out []verdict
	for _, g := range goals {
		cpus := g.cpus
		if cpus == nil {
			cpus = r.cpus
		}
		for _, cpu := range cpus {
			v := verdict{goal: g, cpu: cpu}
			num := key{g.num.workload, cpu, g.num.impl}
			switch {
			case g.den.impl == "":
				v.value, v.ok = r.median(num, g.unit)
			case g.diff:
				a, ok1 := r.median(num, g.unit)
				b, ok2 := r.median(key{g.den.workload, cpu, g.den.impl}, g.unit)
				v.value, v.ok = a-b, ok1 && ok2
			default:
				dcpu := cpu
				if g.denCPU != 0 {
					dcpu = g.denCPU
				}
				v.value, v.ok = r.ratio(num, key{g.den.workload, dcpu, g.den.impl}, g.unit)
			}
			switch g.cmp {
			case "<=":
				v.met = v.value <= g.limit
			case ">=":
				v.met = v.value >= g.limit
			}
			out = append(out, v)
		}
	}
	return out
}
