package owner

import (
	"runtime"
	"sync"
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
func (c *cell) seal() (holders []Holder, after []func()) {
	if c.hooks.CompareAndSwap(nil, sealedHooks) {
		return nil, nil
	}
	h := c.hooks.Load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sealed = true
	return h.holders, h.after
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
