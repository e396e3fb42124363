package owner

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// A Holder holds off the deaths of the tokens it is attached to with
// [Ref.Hold], the way [Ref.Enter] does, but with a count it keeps itself: a
// dispatcher whose hot path must not write a word that every core shares
// keeps a striped count and reports its sum here.
type Holder interface {
	// Held reports whether the holder is inside a section that must
	// complete while the owner still reads alive. A dying token calls it
	// repeatedly, yielding between calls, until it reports false. It must
	// be cheap, must not block, and must never report true for long.
	Held() bool
}

// hooks is what a cell carries beyond its state: the holders attached to it
// and the functions to run after its death. Most tokens never have any, so
// it is allocated on first use.
type hooks struct {
	mu      sync.Mutex
	sealed  bool // the death began: nothing attaches any more
	holders []Holder
	after   []func()
	// The clocks beyond the cell's first that count this token's death
	// (see Track): written under mu, copied on write, and read without it,
	// so that a Track finding its clock already there takes no lock.
	more atomic.Pointer[[]*DeathClock]
}

// hooksOf returns c's hooks, allocating them on first use.
func (c *cell) hooksOf() *hooks {
	if h := c.hooks.Load(); h != nil {
		return h
	}
	c.hooks.CompareAndSwap(nil, &hooks{})
	return c.hooks.Load()
}

// sealedHooks stands in for the hooks of a cell that died with none: a
// late Hold or AfterDeath finds it sealed. It is only ever read.
var sealedHooks = &hooks{sealed: true}

// seal stops new attachments and returns what was attached. It runs on the
// killing goroutine only, after the flip to dying.
//
// The clocks it returns are final: a Track that comes later is refused, or
// finds its clock among them. Sealed after the flip to dying, the cell's
// first clock is final too (see Track).
func (c *cell) seal() (holders []Holder, after []func(), clocks clockSet) {
	clocks.first = c.clock0.Load()
	if c.hooks.CompareAndSwap(nil, sealedHooks) {
		return nil, nil, clocks
	}
	h := c.hooks.Load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sealed = true
	if l := h.more.Load(); l != nil {
		clocks.more = *l
	}
	return h.holders, h.after, clocks
}

// clockSet is the clocks a death ticks, as seal found them.
type clockSet struct {
	first *DeathClock // the cell's own; nil when there is none
	more  []*DeathClock
}

// add adds d to every clock of the set, on the stripe of the token with
// the given ID.
func (s clockSet) add(id, d uint64) {
	if s.first != nil {
		s.first.add(id, d)
	}
	for _, k := range s.more {
		k.add(id, d)
	}
}

// waitHolders waits until no holder is held. A holder is held only for a
// few instructions of a dispatcher admitting a call, so the wait is short.
func waitHolders(holders []Holder) {
	for _, h := range holders {
		for h.Held() {
			runtime.Gosched()
		}
	}
}

// Hold attaches h to the token behind r: every death of the token, once it
// has begun, waits until h reports that it is not held before it completes.
// Until then the token still reads alive. It reports false, attaching
// nothing, when the token is already dying or dead.
//
// A holder must announce itself before it reads the owner's liveness, and
// the death looks at the holders after it has flipped the token to dying;
// so either the holder's read finds the death begun and it is held, making
// the death wait, or the death finds the holder's announcement. Attach holds
// once, before anything can be held; there is no detaching, since a holder
// lives as long as its owner's entries do. Cost: a mutex and an allocation
// the first time; nothing on the holder's hot path.
func (r Ref) Hold(h Holder) bool {
	if r.c == nil {
		return false
	}
	hk := r.c.hooksOf()
	hk.mu.Lock()
	defer hk.mu.Unlock()
	// The death flips the state before it seals, so a death that sealed
	// before this lock is visible here; one that seals after will see h.
	if hk.sealed || r.c.state.Load() != stateAlive {
		return false
	}
	hk.holders = append(hk.holders, h)
	return true
}

// AfterDeath arranges for f to run in a goroutine of its own once the token
// behind r is dead, by whichever path it dies: the way [context.AfterFunc]
// does for a context. If the token is already dying or dead, f runs as soon
// as the death has completed. f runs exactly once. For the zero Ref, which
// is dead, f runs at once (in its own goroutine).
//
// A registry uses it to reclaim a dead owner's entries promptly without a
// goroutine of its own waiting on [Ref.Done]. Cost: a mutex and, the first
// time, an allocation; a goroutine only when the token dies.
func (r Ref) AfterDeath(f func()) {
	if r.c == nil {
		go f()
		return
	}
	hk := r.c.hooksOf()
	hk.mu.Lock()
	if !hk.sealed {
		hk.after = append(hk.after, f)
		hk.mu.Unlock()
		return
	}
	hk.mu.Unlock()
	done := r.c.done
	go func() {
		<-done
		f()
	}()
}

// Track attaches the clock k to the token behind r, so that the token's
// death ticks k: counted in progress on k before the token reads dead, and
// completed after (see [DeathClock]). It reports true when k is attached
// and the token had not begun dying: then its death will tick k. It
// reports false when the token is dying or dead, or r is the zero Ref; k
// may then still count that death, which costs its reader nothing worse
// than a sweep that finds nothing.
//
// A registry tracks the owner of an entry before the entry can be seen,
// and reports a refusal as the owner's death: then every owner of every
// visible entry ticks the registry's clock when it dies. An attachment
// lasts as long as the token; a token that no longer holds anything in the
// registry only makes the clock tick once more than needed.
//
// Cost: a token keeps its first clock in its own cell, so tracking it on
// one clock takes a compare-and-swap the first time and two loads after,
// with no lock and no allocation. Further clocks take a mutex and a copy of
// their list the first time (and, for the token's first hook of any kind,
// its allocation), and a few loads after. Safe for concurrent use with
// everything, the token's death included.
func (r Ref) Track(k *DeathClock) bool {
	c := r.c
	if c == nil {
		return false
	}
	// The cell's own clock: announce, then look, as Enter does. A death
	// flips the cell to dying and then reads the clock (seal): if this
	// load finds the cell alive, the flip comes later and the death finds
	// k. If it finds it dying, the death may or may not have found k.
	first := c.clock0.Load()
	if first == nil && !c.clock0.CompareAndSwap(nil, k) {
		first = c.clock0.Load()
	}
	if testHookTracking != nil {
		testHookTracking()
	}
	if first == nil || first == k {
		return c.state.Load() == stateAlive
	}
	if h := c.hooks.Load(); h != nil && tracks(h, k) {
		// Added under the lock before any seal, so the death ticks it.
		return c.state.Load() == stateAlive
	}
	hk := c.hooksOf()
	hk.mu.Lock()
	defer hk.mu.Unlock()
	// As in Hold: a death seals after its flip to dying, so one that
	// sealed before this lock shows here, and one that seals after it
	// finds k in the list.
	if hk.sealed || c.state.Load() != stateAlive {
		return false
	}
	if !tracks(hk, k) {
		var next []*DeathClock
		if l := hk.more.Load(); l != nil {
			next = slices.Clip(*l)
		}
		next = append(next, k)
		hk.more.Store(&next)
	}
	return true
}

// tracks reports whether k is among h's further clocks.
func tracks(h *hooks, k *DeathClock) bool {
	l := h.more.Load()
	return l != nil && slices.Contains(*l, k)
}
