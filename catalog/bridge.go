package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// route is what the registry stores for a name: the route's description,
// its body, and the bridge to its consumer's goroutines. It holds only a
// Ref of the owner (and a releaser that does not keep the token alive), so
// that a dropped Consumer's token can still be collected.
type route struct {
	cat  *Catalog
	side *side
	name string

	tool     Tool
	resource Resource
	handle   func(*invocation) // runs the body on a bridge goroutine
	planned  bool              // the owner registered a security plan

	ref     owner.Ref
	release func() // kills the owner: an unwound consumer is a dead one

	inbox    chan *invocation
	workers  int
	live     atomic.Int32  // bridge goroutines still running
	exited   chan struct{} // closed when the last one exits
	retired  atomic.Bool   // the route was reclaimed after its owner died
	inflight atomic.Int64  // calls between hand-off and reply
	stopping atomic.Bool   // Stop is draining
	idle     chan struct{} // signalled when inflight drops to 0 while stopping
}

func (rt *route) init(c *Catalog, s *side, name string, ref owner.Ref, release func(), workers, depth int) {
	rt.cat, rt.side, rt.name = c, s, name
	rt.ref, rt.release = ref, release
	rt.workers = workers
	rt.inbox = make(chan *invocation, depth)
	rt.exited = make(chan struct{})
	rt.idle = make(chan struct{}, 1)
}

// invocation is one call crossing the bridge. Exactly one side decides its
// fate: a bridge goroutine takes it, or the caller abandons it, never both.
type invocation struct {
	ctx       context.Context
	name      string
	args      json.RawMessage
	principal bindsec.Principal

	state atomic.Uint32
	done  chan struct{} // closed once the taker has set the results

	result   Result
	contents Contents
	err      error
}

const (
	pending uint32 = iota
	taken
	abandoned
)

func (inv *invocation) take() bool    { return inv.state.CompareAndSwap(pending, taken) }
func (inv *invocation) abandon() bool { return inv.state.CompareAndSwap(pending, abandoned) }

func (rt *route) startWorkers() {
	rt.live.Store(int32(rt.workers))
	for range rt.workers {
		go rt.work()
	}
}

// work is one bridge goroutine: it serves invocations until the owner dies,
// then reclaims the route.
func (rt *route) work() {
	defer func() {
		if rt.live.Add(-1) == 0 {
			close(rt.exited)
		}
	}()
	done := rt.ref.Done()
	for {
		select {
		case inv := <-rt.inbox:
			rt.serve(inv)
		case <-done:
			rt.retire()
			return
		}
	}
}

// serve runs one invocation's body, unless the caller gave up on it or the
// owner died after the hand-off: then the body never runs.
func (rt *route) serve(inv *invocation) {
	if !inv.take() {
		return
	}
	defer close(inv.done)
	if !rt.ref.Alive() {
		inv.err = rt.gone()
		return
	}
	defer func() {
		if p := recover(); p != nil {
			inv.err = fmt.Errorf("catalog: %s %q: %w: %v", rt.side.kind, rt.name, ErrRoutePanicked, p)
			rt.release()
		}
	}()
	rt.handle(inv)
}

// retire reclaims a dead owner's route entry and plan, once, owner-
// conditionally: a successor's are never touched.
func (rt *route) retire() {
	if !rt.retired.CompareAndSwap(false, true) {
		return
	}
	if rt.cat.beforeRetire != nil {
		rt.cat.beforeRetire(rt.name)
	}
	rt.side.reg.UnregisterOwned(rt.name, rt.ref)
	rt.side.book.UnregisterPlanOwned(rt.name, rt.ref)
	// Signal even when a listing or a lookup reclaimed the entry first:
	// that reclaim moved the version but signalled nobody. A spurious
	// wake-up costs a version comparison.
	rt.cat.notify()
}

func (rt *route) gone() error {
	return fmt.Errorf("catalog: %s %q: %w", rt.side.kind, rt.name, ErrRouteGone)
}

// call hands inv to the route's goroutines and waits for the result.
func (rt *route) call(ctx context.Context, inv *invocation) error {
	if !rt.ref.Alive() {
		return rt.gone()
	}
	rt.inflight.Add(1)
	defer rt.leave()
	done := rt.ref.Done()
	select {
	case rt.inbox <- inv:
	case <-done:
		return rt.gone()
	case <-ctx.Done():
		return ctx.Err()
	default:
		return fmt.Errorf("catalog: %s %q: %w", rt.side.kind, rt.name, ErrOverloaded)
	}
	select {
	case <-inv.done:
		return nil
	case <-ctx.Done():
		// If a goroutine already took it, the body runs on; its result
		// lands in inv and is dropped.
		inv.abandon()
		return ctx.Err()
	case <-done:
		if inv.abandon() {
			return rt.gone()
		}
	}
	// Taken before the owner died: the body is running and will answer.
	select {
	case <-inv.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rt *route) leave() {
	if rt.inflight.Add(-1) == 0 && rt.stopping.Load() {
		select {
		case rt.idle <- struct{}{}:
		default:
		}
	}
}

// drain waits for the calls that reached the route to finish.
func (rt *route) drain(ctx context.Context) error {
	rt.stopping.Store(true)
	for rt.inflight.Load() > 0 {
		select {
		case <-rt.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitWorkers waits for the bridge goroutines to exit after the owner died.
func (rt *route) awaitWorkers(ctx context.Context) error {
	select {
	case <-rt.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CallTool calls the tool name with args, presenting credential (a bearer
// token without its prefix; "" for none) to the route's plan. Errors:
// ErrUnknownTool, ErrRouteGone, ErrRoutePanicked, ErrOverloaded, a denial
// (see Denied), the context's error, or the handler's own error.
func (c *Catalog) CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (Result, error) {
	inv, err := c.dispatch(ctx, &c.tools, name, credential, args)
	if err != nil {
		return Result{}, err
	}
	return inv.result, inv.err
}

// ReadResource reads the resource uri, presenting credential to its plan.
// Errors as CallTool, with ErrUnknownResource.
func (c *Catalog) ReadResource(ctx context.Context, uri, credential string) (Contents, error) {
	inv, err := c.dispatch(ctx, &c.resources, uri, credential, nil)
	if err != nil {
		return Contents{}, err
	}
	return inv.contents, inv.err
}

func (c *Catalog) dispatch(ctx context.Context, s *side, name, credential string, args json.RawMessage) (*invocation, error) {
	rt, _, ok := s.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("catalog: %w %s", s.unknown, quote.Name(name))
	}
	pr, err := c.guard(ctx, s, rt, credential)
	if err != nil {
		return nil, err
	}
	inv := &invocation{ctx: ctx, name: name, args: args, principal: pr, done: make(chan struct{})}
	if err := rt.call(ctx, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

// guard binds the request to the owner of the entry it resolved: it is
// checked against that owner's plan and no other. A plan of another owner,
// or none where the owner registered one, means the route is changing hands
// or its owner is dying: the request fails with ErrRouteGone, neither
// passed through nor judged by the newcomer's rules. Only a route whose
// owner registered no plan at all falls under the missing-plan mode.
func (c *Catalog) guard(ctx context.Context, s *side, rt *route, credential string) (bindsec.Principal, error) {
	if !rt.planned {
		if _, _, ok := s.book.Lookup(rt.name); ok {
			return bindsec.Principal{}, rt.gone()
		}
		return s.book.MissingPlan(rt.name)
	}
	pr, err := s.book.GuardOwned(ctx, rt.name, rt.ref, credential, c.auth)
	if errors.Is(err, bindsec.ErrPlanOwner) {
		return bindsec.Principal{}, rt.gone()
	}
	return pr, err
}
