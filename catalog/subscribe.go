package catalog

import (
	"fmt"
	"sync"

	"github.com/livereg/livereg/owner"
)

// updates holds the listeners of resource updates (OnResourceUpdated).
type updates struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func(uri string)
}

// OnResourceUpdated makes fn run each time a resource consumer publishes
// an update (Consumer.Updated), with the resource's URI, until the
// returned cancel is called. fn runs on the publisher's goroutine, one
// listener after the other, so it must return promptly: a server queues
// the update and sends it from a goroutine of its own. Safe for concurrent
// use; cancel is idempotent.
func (c *Catalog) OnResourceUpdated(fn func(uri string)) (cancel func()) {
	u := &c.subs
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.fns == nil {
		u.fns = make(map[uint64]func(string))
	}
	id := u.next
	u.next++
	u.fns[id] = fn
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.fns, id)
	}
}

// Updated publishes that the resource k serves has changed: every
// OnResourceUpdated listener gets its URI (package mcpserve sends
// notifications/resources/updated to the sessions subscribed to it). Only
// a live fixed-resource consumer that still holds its URI can publish;
// otherwise Updated returns ErrDeadOwner (k is dead, or its route was
// reclaimed or taken over) or ErrInvalidRoute (k serves no fixed resource).
// It costs a lookup and a call of each listener.
func (k *Consumer) Updated() error {
	rt := k.rt
	if rt.side != &rt.cat.resources {
		return fmt.Errorf("catalog: %s %q: %w: only a resource consumer publishes updates", rt.side.kind, rt.name, ErrInvalidRoute)
	}
	if cur, _, ok := rt.side.reg.Lookup(rt.name); !ok || cur != rt {
		return fmt.Errorf("catalog: resource %q: publish an update: %w", rt.name, ErrDeadOwner)
	}
	u := &rt.cat.subs
	u.mu.Lock()
	fns := make([]func(string), 0, len(u.fns))
	for _, fn := range u.fns {
		fns = append(fns, fn)
	}
	u.mu.Unlock()
	for _, fn := range fns {
		fn(rt.name)
	}
	return nil
}

// ResourceOwner returns the owner of the route that a read of uri would
// reach now (see ReadResource): a live fixed resource's, or the best matching
// live template's; false when none. A server uses it to refuse a
// subscription to a URI nobody serves, and to tell when the owner behind
// a subscribed URI changes. It does not run the route's plan:
// AuthorizeResource does.
//
// A URI longer than Config.MaxURIBytes has no owner: it is not looked up.
func (c *Catalog) ResourceOwner(uri string) (owner.Ref, bool) {
	if c.checkURI(uri) != nil {
		return owner.Ref{}, false
	}
	if _, o, ok := c.resources.reg.Lookup(uri); ok {
		return o, true
	}
	if tr, _ := c.index.match(c, uri); tr != nil {
		return tr.rt.ref, true
	}
	return owner.Ref{}, false
}
