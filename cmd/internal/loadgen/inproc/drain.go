package inproc

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// Invariant 13, stop_drain: Stop returns nil only once every body it
// admitted has ended, and it returns at all. A body counts itself in its
// record's running count from its first line to its last, so a Stop that
// returned nil while the count is not zero let a body run past it (or one
// start after it, which invariant 8 also sees). A Stop still waiting
// after its bound, while the loadgen's bodies never run that long, is a
// drain that missed its wake-up.
//
// Bodies take microseconds, so most Stops find none running. The drain
// probe (drainProbe) makes some Stops wait for one: it holds a body inside
// the route while Stop begins and lets it go a moment later. Other Stops
// get a probe that only keeps calling the route from another goroutine
// while Stop begins, so that a body ends around the instant the drain
// closes the gate, and is the last to end: a drain that misses that
// body's wake-up waits for another that never comes (with a held body
// there is one, which hides the miss).
type drainChecker struct {
	t     *tally
	bound time.Duration // how long a Stop may take
	// hold is how long the drain probe's held body stays inside after
	// Stop began. A Stop that does not drain is seen only if it returns
	// within hold: the loadgen keeps it short, for its throughput, and a
	// test that must see every such Stop makes it long.
	hold time.Duration
}

// stopped judges the Stop of rec that returned err.
func (c drainChecker) stopped(rec *record, err error) {
	c.t.Check(InvStopDrain, 1)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		c.t.Violate(InvStopDrain, "Stop of %s (%s) had not returned after %v, with %d of its bodies running: its drain never woke",
			rec.tag, rec.ns.name, c.bound, rec.running.Load())
	case err != nil:
		// Not a drain's failure: end reports it.
	case rec.running.Load() != 0:
		c.t.Violate(InvStopDrain, "Stop of %s (%s) returned while %d of its bodies still ran",
			rec.tag, rec.ns.name, rec.running.Load())
	}
}

// stop stops h's consumer within the drain bound and judges the Stop.
func (w *world) stop(h *held, l *latencies, o op) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.drain.bound)
	defer cancel()
	t0 := time.Now()
	err := h.k.Stop(ctx)
	l.Record(o, time.Since(t0))
	w.drain.stopped(h.rec, err)
	return err
}

// Timing of the drain probe.
const (
	drainHold  = 500 * time.Microsecond // drainChecker.hold's default
	blockLimit = time.Second            // a held body is let go after this whatever happens
)

// blocker is a body the drain probe holds inside its route: the body whose
// call carries nonce as its probe closes entered and waits for release.
type blocker struct {
	nonce   uint64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker(nonce uint64) *blocker {
	return &blocker{nonce: nonce, entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blocker) let() { b.once.Do(func() { close(b.release) }) }

// hold is run by the body of a call that carries b's nonce.
func (b *blocker) hold() {
	close(b.entered)
	wait.Within(b.release, blockLimit)
}

// maybeBlock holds the body of rec running for a call with probe nonce,
// if that call is the drain probe's.
func (rec *record) maybeBlock(probe uint64) {
	if probe == 0 {
		return
	}
	if b := rec.block.Load(); b != nil && b.nonce == probe {
		b.hold()
	}
}

// drainProbe is one probe in progress: started before a Stop, finished
// after it.
type drainProbe struct {
	b      *blocker
	called chan struct{} // closed when the held call returned
	stop   chan struct{} // ends the hammering
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// startDrainProbe, if hold, holds one body of h's route, and otherwise
// starts calling the route from another goroutine. It returns nil when no
// body could be held; then Stop goes ahead unprobed.
func (w *world) startDrainProbe(h *held, hold bool) *drainProbe {
	ns, rec := h.rec.ns, h.rec
	ctx, cancel := context.WithTimeout(context.Background(), 2*blockLimit)
	p := &drainProbe{b: newBlocker(w.tick()), called: make(chan struct{}), stop: make(chan struct{}), cancel: cancel}
	if hold {
		rec.block.Store(p.b)
		go func() {
			defer close(p.called)
			w.invokeRetry(ctx, ns, callArgs{Seq: w.tick(), Cred: credValid.String(), Probe: p.b.nonce}, credValid)
		}()
		t := time.NewTimer(blockLimit)
		defer t.Stop()
		select {
		case <-p.b.entered:
		case <-p.called: // failed before its body ran
		case <-t.C:
		}
		if !wait.Closed(p.b.entered) {
			p.b.let()
			<-p.called
			cancel()
			return nil
		}
		time.AfterFunc(w.drain.hold, p.b.let)
		return p
	}
	close(p.called) // no held call
	var calls atomic.Int64
	p.wg.Go(func() {
		for !wait.Closed(p.stop) {
			w.invoke(ctx, ns, callArgs{Seq: w.tick(), Cred: credValid.String()}, credValid)
			calls.Add(1)
		}
	})
	for calls.Load() < 2 {
		runtime.Gosched()
	}
	return p
}

// finish ends the probe once Stop has returned.
func (p *drainProbe) finish() {
	close(p.stop)
	p.wg.Wait()
	p.b.let()
	<-p.called
	p.cancel()
}
