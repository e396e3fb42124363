package catalog

import (
	"context"
	"sync/atomic"

	"github.com/livereg/livereg/internal/spread"
	"github.com/livereg/livereg/owner"
)

// gate admits a route's calls and counts the bodies running, so that Stop
// can close it and wait them out, and so that the owner's death waits out
// the admissions in progress (the gate is an [owner.Holder]).
//
// The count is striped: a call adds to one stripe, picked by the address of
// its own stack, and later subtracts from the same one. Goroutines running
// at once have different stacks, so they mostly land on different stripes,
// and the pick costs a multiply where a random number costs a few
// nanoseconds. A route that every core calls then
// writes to many cache lines instead of one, which is what lets dispatch
// scale with cores (BenchmarkAdmission in this package sets it beside a
// single shared counter, and beside a gate without the hold).
//
// Each stripe counts two things in one word: running bodies in its low
// half, and admissions in progress (announced, not yet decided) in its high
// half. Both are never negative, so the word is zero only when both are.
type gate struct {
	stripes []stripe // length a power of two
	mask    uint32
	closing atomic.Bool   // Stop began draining: no more admissions
	idle    chan struct{} // signalled when a stripe empties while closing
	hooks   *hooks        // test hooks; nil outside tests
}

type stripe struct {
	n atomic.Int64
	_ [56]byte // one stripe per cache line
}

// admitting is one admission in progress, in a stripe's high half.
const admitting = 1 << 32

// stripeCount is the number of stripes a new gate gets: four times the
// GOMAXPROCS, rounded up to a power of two, at most 16 (1 KiB). Two
// goroutines calling one route share a stripe, and a cache line, for as
// long as their stacks stay where they are, with a chance of one in the
// stripe count, and a run of BenchmarkDispatch at -cpu 2 in which they do
// does not scale. Four per core make that one chance in eight for two
// cores, for 128 bytes more a route per core. 0 means that; tests set it
// to measure a single shared counter.
var stripeCount = 0

func (g *gate) init(h *hooks) {
	n := stripeCount
	if n == 0 {
		n = spread.Count(4, 16)
	}
	g.stripes = make([]stripe, n)
	g.mask = uint32(n - 1)
	g.idle = make(chan struct{}, 1)
	g.hooks = h
}

// enter admits one call of ref's route, or reports false when the owner is
// dead or the gate is closing: then the body must not run. It returns the
// stripe to pass to exit once the body returns.
//
// The linearization point of an admitted call is its read of the owner's
// liveness, taken while its announcement is visible. Stop's drain and the
// owner's death both look at the announcements after flipping their own
// flag, so each either finds the call counted or the call finds the flag:
// a Dekker handshake on sequentially consistent atomics.
func (g *gate) enter(ref owner.Ref) (*stripe, bool) {
	s := &g.stripes[spread.Hash()&g.mask]
	s.n.Add(admitting + 1)
	if g.hooks != nil && g.hooks.admitting != nil {
		g.hooks.admitting()
	}
	if g.closing.Load() || !ref.Alive() {
		g.leave(s, admitting+1)
		return nil, false
	}
	s.n.Add(-admitting)
	return s, true
}

// exit ends a body that enter admitted.
func (g *gate) exit(s *stripe) { g.leave(s, 1) }

func (g *gate) leave(s *stripe, d int64) {
	// Subtract, then look at closing: drain sets closing, then looks at
	// the stripes, so one of the two sees the other.
	left := s.n.Add(-d)
	if g.hooks != nil && g.hooks.leaving != nil {
		g.hooks.leaving()
	}
	if left == 0 && g.closing.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// Held reports whether an admission is in progress: a death waits while it
// is, so that a call admitted as alive is admitted before the death
// completes.
func (g *gate) Held() bool {
	for i := range g.stripes {
		if g.stripes[i].n.Load() >= admitting {
			if g.hooks != nil && g.hooks.held != nil {
				g.hooks.held()
			}
			return true
		}
	}
	return false
}

// busy reports whether any call is admitted or being admitted.
func (g *gate) busy() bool {
	for i := range g.stripes {
		if g.stripes[i].n.Load() != 0 {
			return true
		}
	}
	return false
}

// drain closes the gate, so that no call is admitted any more, and waits,
// bounded by ctx, until no admitted body is running. Once it returns nil,
// no body of the route runs or will ever start.
func (g *gate) drain(ctx context.Context) error {
	g.closing.Store(true)
	if g.hooks != nil && g.hooks.closed != nil {
		g.hooks.closed()
	}
	for g.busy() {
		if g.hooks != nil && g.hooks.draining != nil {
			g.hooks.draining()
		}
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// running returns the number of bodies running, for tests and stats.
func (g *gate) running() int64 {
	var n int64
	for i := range g.stripes {
		n += g.stripes[i].n.Load() % admitting
	}
	return n
}
