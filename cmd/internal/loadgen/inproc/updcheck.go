package inproc

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/catalog"
)

// updateChecker checks invariant 12, resource_update. The listener it
// registers (heard) counts the updates of each loadgen URI; the loadgen's
// own Updated calls on one URI run one at a time (publish), and the
// catalog calls its listeners on the publisher's goroutine before Updated
// returns, so the count's change across one call is exactly what that call
// delivered, and an update heard while no call on its URI is in flight was
// published by nobody.
type updateChecker struct {
	t     *tally
	byURI map[string]*updState // built by newWorld, read-only after
}

// updState is one fixed URI's publishing state.
type updState struct {
	mu    sync.Mutex  // serializes the loadgen's Updated calls on the URI
	open  atomic.Bool // an Updated call on the URI is in flight
	heard atomic.Int64
}

func newUpdateChecker(t *tally, resources []*nameState) updateChecker {
	c := updateChecker{t: t, byURI: make(map[string]*updState, len(resources))}
	for _, ns := range resources {
		c.byURI[ns.name] = &updState{}
	}
	return c
}

// heard is the catalog's update listener. It runs on the publisher's
// goroutine and costs a map read and an atomic add.
func (c updateChecker) heard(uri string) {
	s := c.byURI[uri]
	if s == nil {
		c.t.Violate(InvResourceUpdate, "an update of %q reached the listener, a URI no loadgen consumer serves", uri)
		return
	}
	if !s.open.Load() {
		c.t.Violate(InvResourceUpdate, "an update of %s reached the listener while no Updated call on it was in flight", uri)
	}
	s.heard.Add(1)
}

// publish has h's consumer, if it serves a fixed resource and is still
// held, publish an update, and judges the call (invariant 12). Calls on
// one URI wait for each other; the calls on it are a consumer's few.
func (w *world) publish(h *held) {
	if h.k == nil || h.rec.ns.kind != kindResource {
		return
	}
	s := w.upd.byURI[h.rec.ns.name]
	s.mu.Lock()
	s.open.Store(true)
	before := s.heard.Load()
	begin := w.tick()
	err := h.k.Updated()
	heard := s.heard.Load() - before
	s.open.Store(false)
	s.mu.Unlock()
	if err == nil {
		w.updatesPublished.Add(1)
	} else {
		w.updatesRefused.Add(1)
	}
	w.upd.published(h.rec, begin, err, heard)
}

// published judges one Updated call of rec's consumer that began at begin,
// returned err and delivered heard updates. A call that began after the
// owner was observed dead must be refused with ErrDeadOwner and reach no
// listener; a call whose owner still lived, Stop not begun, once it had
// returned (so throughout it) must succeed and reach the listener once.
// Calls between the two, whose owner died while they ran, are not judged:
// ADR-0068 allows either answer there.
func (c updateChecker) published(rec *record, begin uint64, err error, heard int64) {
	if err != nil && !errors.Is(err, catalog.ErrDeadOwner) {
		c.t.Unexpected("update of %s by %s: %v", rec.ns.name, rec.tag, err)
	}
	switch {
	case rec.diedBefore(begin):
		c.t.Check(InvResourceUpdate, 1)
		if err == nil || heard != 0 {
			c.t.Violate(InvResourceUpdate, "%s, observed dead (%s) at %d, published an update of %s at %d: got %v, %d listener calls",
				rec.tag, rec.deathShape(), rec.death.Load(), rec.ns.name, begin, err, heard)
		}
	case rec.alive() && !rec.stopping.Load():
		c.t.Check(InvResourceUpdate, 1)
		if err != nil || heard != 1 {
			c.t.Violate(InvResourceUpdate, "%s, alive and holding %s throughout, published an update at %d: got %v, %d listener calls, want nil and 1",
				rec.tag, rec.ns.name, begin, err, heard)
		}
	}
}
