package inproc

import (
	"context"
	"github.com/livereg/livereg/catalog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// Random streams, so that each worker's choices depend only on the seed
// and the worker's index.
const (
	streamResolver = iota + 1
	streamConsumer
	streamMCP
)

func newRand(seed uint64, stream, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(stream)<<32|uint64(index)))
}

// runState is what the workers need to know about the run's end.
type runState struct {
	stopping atomic.Bool   // set once the run should wind down
	stopCh   chan struct{} // closed at the same time
	once     sync.Once
	ops      atomic.Int64 // resolver operations begun
	reason   atomic.Value // string: why the run ended

	mu        sync.Mutex
	survivors []*held // consumers alive when their goroutine saw the end
}

func newRunState() *runState { return &runState{stopCh: make(chan struct{})} }

// finish ends the run; only the first reason is kept.
func (r *runState) finish(reason string) {
	r.once.Do(func() {
		r.reason.Store(reason)
		r.stopping.Store(true)
		close(r.stopCh)
	})
}

// resolverYield is how many operations a resolver runs between yields.
const resolverYield = 32

// resolver calls and lists until the run ends.
func (w *world) resolver(ctx context.Context, rs *runState, index int, l *latencies) {
	rng := newRand(w.cfg.Seed, streamResolver, index)
	m := w.cfg.Mix
	for i := 0; !rs.stopping.Load(); i++ {
		// A call runs its body on this goroutine and never blocks, so a
		// resolver would hold its core until the scheduler preempts it,
		// every 10 ms; consumers waking from their hold would queue behind
		// it, and the run would see a fraction of the deaths it is for.
		// Serving goroutines block on I/O between calls; this stands in.
		if i%resolverYield == 0 {
			runtime.Gosched()
		}
		if w.cfg.Ops > 0 && rs.ops.Add(1) > w.cfg.Ops {
			rs.finish("ops")
			return
		}
		n := rng.IntN(m.Call + m.Get + m.Read + m.List)
		if n >= m.Call+m.Get+m.Read {
			w.listOf(pickKind(rng, m), l)
			continue
		}
		cred := credValid
		if rng.IntN(100) < m.BadCred {
			cred = credClass(1 + rng.IntN(int(numCreds)-1))
		}
		switch {
		case n < m.Call:
			w.call(ctx, w.names[rng.IntN(len(w.names))], cred, l)
		case n < m.Call+m.Get:
			w.getPrompt(ctx, w.prompts[rng.IntN(len(w.prompts))], cred, l)
		case pickRead(rng, m) == kindResource:
			w.getPrompt(ctx, w.resources[rng.IntN(len(w.resources))], cred, l)
		default:
			w.readTemplate(ctx, w.groups[rng.IntN(len(w.groups))], rng.IntN(2) == 0, cred, l)
		}
	}
}

// pickKind draws a route kind by the mix's weights; tools if all are 0.
func pickKind(rng *rand.Rand, m Mix) kind {
	return weighted(rng, kindTool, []int{m.Tool, m.Prompt, m.Template, m.Resource},
		[]kind{kindTool, kindPrompt, kindTemplate, kindResource})
}

// pickRead draws what a read reads, a templated URI or a fixed resource,
// by the template and resource weights; templated if both are 0.
func pickRead(rng *rand.Rand, m Mix) kind {
	if total := m.Template + m.Resource; total > 0 && rng.IntN(total) >= m.Template {
		return kindResource
	}
	return kindTemplate
}

// namesOf returns the names (template keys) of kind k.
func (w *world) namesOf(k kind) []*nameState {
	switch k {
	case kindPrompt:
		return w.prompts
	case kindTemplate:
		return w.templates
	case kindResource:
		return w.resources
	}
	return w.names
}

// pickShape draws a death shape by the mix's weights.
func pickShape(rng *rand.Rand, m Mix) shape {
	return weighted(rng, shapeDrop, []int{m.Stop, m.Cancel, m.Panic, m.Drop},
		[]shape{shapeStop, shapeCancel, shapePanic, shapeDrop})
}

// weighted draws one of values, each as likely as its weight; none, when
// every weight is 0.
func weighted[T any](rng *rand.Rand, none T, weights []int, values []T) T {
	total := 0
	for _, w := range weights {
		total += w
	}
	if total == 0 {
		return none
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return values[i]
		}
		n -= w
	}
	return none
}

// consumer starts consumers, holds each a random while, and ends it by a
// random shape, until the run ends. A consumer it holds then is handed to
// the run as a survivor, still alive.
func (w *world) consumer(rs *runState, index int, l *latencies) {
	rng := newRand(w.cfg.Seed, streamConsumer, index)
	m := w.cfg.Mix
	var late *held // a crashed consumer whose Stop comes after a restart
	defer func() {
		if late != nil {
			w.lateStop(late, nil, l)
		}
	}()
	for !rs.stopping.Load() {
		set := w.namesOf(pickKind(rng, m))
		ns := set[rng.IntN(len(set))]
		public := rng.IntN(100) < m.Public
		if late != nil {
			// Restart the crashed consumer's name at once, with a plan the
			// late stop could wrongly remove.
			ns, public = late.rec.ns, false
		}
		h, err := w.start(ns, public, l)
		if late != nil {
			w.lateStop(late, h, l)
			late = nil
		}
		if err != nil {
			sleepRand(rng, 500*time.Microsecond)
			continue
		}
		w.publish(h) // a resource consumer publishes an update now and then
		if !w.hold(rs, h, rng) {
			continue
		}
		w.publish(h)
		if rs.stopping.Load() {
			rs.addSurvivor(h)
			return
		}
		sh := w.end(h, pickShape(rng, m), l)
		if sh != shapeNone {
			w.publish(h) // observed dead by now: must be refused
		}
		if (sh == shapeCancel || sh == shapePanic) && rng.IntN(100) < m.Late {
			late = h
		}
	}
}

// hold keeps h for a random while. It reports false if h died meanwhile,
// which nothing in the workload causes: the death is observed and counted
// as unexpected.
func (w *world) hold(rs *runState, h *held, rng *rand.Rand) bool {
	var d time.Duration
	if w.cfg.Hold > 0 {
		d = time.Duration(rng.Int64N(int64(w.cfg.Hold) + 1))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-rs.stopCh:
	case <-h.done:
		w.observeDeath(h.rec, shapeUnexpected)
		w.t.Unexpected("%s (%s) died while held, with nobody ending it", h.rec.tag, h.rec.ns.name)
		h.cancel()
		return false
	}
	return true
}

func (rs *runState) addSurvivor(h *held) {
	rs.mu.Lock()
	rs.survivors = append(rs.survivors, h)
	rs.mu.Unlock()
}

func sleepRand(rng *rand.Rand, most time.Duration) {
	time.Sleep(time.Duration(rng.Int64N(int64(most))))
}

// prober checks the catalog's counts against each kind's cap, and its
// task store against its bounds, every interval.
func (w *world) prober(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() {
		st := w.sys.Stats()
		for _, c := range w.capk {
			c.sample(st)
		}
		checkTaskStore(w.t, st.Tasks)
	})
}

// checkTaskStore is invariant 19: the task store holds no more tasks than
// its caps, in all and for any one credential, and no more result bytes
// than its budget, however many tasks the run starts.
func checkTaskStore(t *tally, n catalog.TaskCounts) {
	t.Check(InvTaskStoreBounds, 1)
	switch {
	case n.Held > TaskCap, n.Held < 0:
		t.Violate(InvTaskStoreBounds, "the task store holds %d tasks; its cap is %d", n.Held, TaskCap)
	case n.MostPerCaller > TaskCapPerCaller:
		t.Violate(InvTaskStoreBounds, "one credential holds %d tasks; its cap is %d", n.MostPerCaller, TaskCapPerCaller)
	case n.ResultBytes > TaskResultBytes || n.ResultBytes < 0:
		t.Violate(InvTaskStoreBounds, "the task store keeps %d bytes of results; its budget is %d", n.ResultBytes, TaskResultBytes)
	}
}
