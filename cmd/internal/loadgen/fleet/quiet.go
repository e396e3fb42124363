package fleet

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// quietPairs is how many local and forwarded calls quietLatency makes.
const quietPairs = 300

// ForwardTarget is what a forwarded tools/call may add to a local one at
// the median, measured with churn stopped.
const ForwardTarget = time.Millisecond

// quietLatency measures, with churn stopped, the same trivial call made
// through the replica that holds its route and through each other replica
// (forwarded), one call at a time, in turn: the forward's own cost, apart
// from the queueing that the load phase adds to both.
func (w *world) quietLatency(ctx context.Context) {
	ups := w.f.up()
	if len(ups) < 2 {
		return
	}
	holder, others := ups[0], ups[1:]
	ns := &nameState{name: "latency-probe"}
	h, err := w.start(holder, ns, true)
	if err != nil {
		w.t.Unexpected("start the latency probe on %s: %v", holder.name, err)
		return
	}
	defer w.end(h, shapeStop)
	deadline := time.Now().Add(5 * time.Second)
	for _, r := range others {
		for {
			if _, ok := r.rep.Peer(catalog.KindTool, ns.name); ok {
				break
			}
			if time.Now().After(deadline) {
				w.t.Unexpected("%s does not locate the latency probe on %s after 5s", r.name, holder.name)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := range quietPairs {
		w.quietCall(ctx, holder, ns.name, opQuietLocal)
		w.quietCall(ctx, others[i%len(others)], ns.name, opQuietForward)
	}
}

func (w *world) quietCall(ctx context.Context, r *replica, name string, o op) {
	a := callArgs{Seq: w.tick(), Cred: credValid, Via: r.id}
	t0 := time.Now()
	res, err := r.clients[0].CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a})
	d := time.Since(t0)
	if oc, text := classify(res, err); oc != outcomeOK {
		w.t.Unexpected("latency probe call through %s: %s %s", r.name, oc, text)
		return
	}
	w.lat.Record(o, d)
}
