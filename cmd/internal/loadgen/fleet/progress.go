package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// Progress across the fleet (invariant 12). A resolver sometimes calls a
// tool with a progress token; the body reports progress 1, 2 and 3 of 3,
// notes how many reports its caller's Client took, and answers as any
// call's. The caller is the SDK client of the replica it called, whose
// ProgressNotificationHandler may run after CallTool has returned: so the
// check is on what the handler hears, in the order it hears it, and on
// the count arriving within progressPatience of the result, not on its
// arriving before the result on the wire.

// progressSteps is how many reports a progress body makes.
const progressSteps = 3

// progressPatience bounds how long after the result the caller waits for
// the reports its body made: the wire carries them before the result, so
// only the client's handoff to its handler lags.
const progressPatience = 2 * time.Second

// progressBody is what a body that reported progress noted: its
// consumer, whether its caller's Client takes progress, and how many
// reports it took (returned nil).
type progressBody struct {
	rec    *record
	client bool
	sent   int
}

// progressBook pairs what bodies reported with what callers heard.
type progressBook struct {
	nonce  atomic.Uint64
	bodies sync.Map // nonce → *progressBody

	mu    sync.Mutex
	heard map[string][]float64 // progress token → values in the order heard
	wake  chan struct{}        // closed and replaced on every value heard

	ok, forwarded, unjudged atomic.Int64
	outcomes                [numOutcomes]atomic.Int64
}

func newProgressBook() *progressBook {
	return &progressBook{heard: map[string][]float64{}, wake: make(chan struct{})}
}

// token is the progress token of the call nonce.
func progressToken(nonce uint64) string { return fmt.Sprintf("pg-%d", nonce) }

// hear is every SDK client's ProgressNotificationHandler. Nil-safe.
func (b *progressBook) hear(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if b == nil || req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	b.mu.Lock()
	b.heard[tok] = append(b.heard[tok], req.Params.Progress)
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// report is the body's side: it reports progressSteps steps through c and
// notes what its caller took.
func (b *progressBook) report(ctx context.Context, c catalog.Call, nonce uint64, rec *record) {
	cl := catalog.ClientFrom(ctx)
	pb := &progressBody{rec: rec, client: cl != nil && cl.Progress != nil}
	for i := 1; i <= progressSteps; i++ {
		if c.ReportProgress(ctx, catalog.Progress{Progress: float64(i), Total: progressSteps}) == nil {
			pb.sent++
		}
	}
	b.bodies.Store(nonce, pb)
}

// awaitHeard waits up to patience for n values of tok, and returns what
// was heard (and forgets it).
func (b *progressBook) awaitHeard(tok string, n int, patience time.Duration) []float64 {
	deadline := time.Now().Add(patience)
	for {
		b.mu.Lock()
		got, wake := b.heard[tok], b.wake
		if len(got) >= n || !time.Now().Before(deadline) {
			delete(b.heard, tok)
			b.mu.Unlock()
			return got
		}
		b.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// judgeProgress judges a progress call nonce through via, answered by the
// body of the consumer tagged text: the reports its body made reach the
// caller in order, each once, and all of them within patience.
func (w *world) judgeProgress(nonce uint64, via *replica, text string) {
	b := w.prog
	v, ok := b.bodies.LoadAndDelete(nonce)
	if !ok {
		// The answer came from no body's progress path: forward_answer
		// judges whose it was.
		b.unjudged.Add(1)
		return
	}
	pb := v.(*progressBody)
	if pb.rec.tag != text {
		b.unjudged.Add(1)
		return
	}
	b.ok.Add(1)
	if pb.rec.rep != via {
		b.forwarded.Add(1)
	}
	heard := b.awaitHeard(progressToken(nonce), pb.sent, progressPatience)
	judgeHeard(w.t, pb, via, pb.rec.rep != via, heard)
}

// judgeHeard checks what the caller heard of pb's reports.
func judgeHeard(t *tally, pb *progressBody, via *replica, forwarded bool, heard []float64) {
	how := "a local call"
	if forwarded {
		how = "a call forwarded to " + pb.rec.rep.name
	}
	t.Check(InvNotificationOrder, 1)
	if !pb.client {
		t.Violate(InvNotificationOrder, "the body of %s, for %s through %s with a progress token, had no Client to report progress to", pb.rec.tag, how, via.name)
		return
	}
	for i := 1; i < len(heard); i++ {
		if heard[i] <= heard[i-1] {
			t.Violate(InvNotificationOrder, "the caller of %s through %s heard progress %v: not in the order %s's body reported it", how, via.name, heard, pb.rec.tag)
			return
		}
	}
	switch {
	case pb.sent < progressSteps:
		t.unsure(InvNotificationOrder) // a report failed: the count proves nothing
	case len(heard) < pb.sent:
		t.Violate(InvNotificationOrder, "the caller of %s through %s heard progress %v within %v of the result, not the %d reports %s's body made",
			how, via.name, heard, progressPatience, pb.sent, pb.rec.tag)
	case len(heard) > pb.sent:
		t.Violate(InvNotificationOrder, "the caller of %s through %s heard progress %v, more than the %d reports %s's body made", how, via.name, heard, pb.sent, pb.rec.tag)
	}
}
