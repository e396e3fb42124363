package owner

import (
	"context"
	"runtime"
	"sync/atomic"
)

// Cell states. A death moves alive → dying → dead; readers treat dying as
// alive, so a death becomes visible only after it has been counted as in
// progress on the death clock.
const (
	stateAlive uint32 = iota
	stateDying
	stateDead
)

// cell is the liveness state shared by a Token and all its Refs.
//
// It holds a pointer (the channel) and is larger than 16 bytes, so it never
// lands in the tiny allocator, where a pointer-free object can share a block
// with a live neighbour and outlive its last reference.
type cell struct {
	state atomic.Uint32
	holds atomic.Int32 // Enter calls not yet matched by Exit
	id    uint64
	done  chan struct{}
	hooks atomic.Pointer[hooks] // holders, after-death functions and clocks; see hooks.go
	// The first death clock that tracks this token (see Track), kept here
	// so that tracking a token on one registry allocates nothing. The cell
	// stays in the same size class with it.
	clock0 atomic.Pointer[DeathClock]
	cause  atomic.Uint32 // how it died; set by the killer before the flip to dead
}

// lastID numbers cells process-wide; IDs start at 1.
var lastID atomic.Uint64

func newCell() *cell {
	return &cell{id: lastID.Add(1), done: make(chan struct{})}
}

// kill makes the cell dead. Only the first caller does the work; the others
// wait until it is done, so that every caller returns with the cell dead.
// It reports whether this call was the one that killed it.
func (c *cell) kill(cause Cause) bool {
	if !c.state.CompareAndSwap(stateAlive, stateDying) {
		<-c.done
		return false
	}
	// Before the death is visible: whoever sees the cell dead sees why.
	c.cause.Store(uint32(cause))
	clock.Add(deathStarted)
	// Wait out the holds taken before the flip to dying: each covers a few
	// instructions of a registry publishing an entry of this owner, which
	// must become visible while the owner still reads alive.
	for c.holds.Load() != 0 {
		runtime.Gosched()
	}
	holders, after, clocks := c.seal()
	// The clocks tracking this token count the death as the process-wide
	// clock does: in progress before the flip to dead, completed after.
	// Sealed, the list is final: a Track that comes later is refused.
	clocks.add(c.id, deathStarted)
	waitHolders(holders)
	if testHookBeforeFlip != nil {
		testHookBeforeFlip()
	}
	c.state.Store(stateDead)
	close(c.done)
	if testHookDeathFlipped != nil {
		testHookDeathFlipped()
	}
	clock.Add(deathCompleted)
	clocks.add(c.id, deathCompleted)
	for _, f := range after {
		go f()
	}
	return true
}

// Token is the strong handle of one owner: the consumer that minted it keeps
// it for as long as it runs. A Token is safe for concurrent use.
//
// A Token must not be copied after first use; pass the pointer.
type Token struct {
	c       *cell
	stop    func() bool // deregisters the context.AfterFunc, if any
	cleanup runtime.Cleanup
}

// cleanupArg is what the drop-path cleanup sees. It must not refer to the
// Token, or the Token would never become unreachable.
type cleanupArg struct {
	c    *cell
	stop func() bool
}

// New mints a live token with no context: it dies when released, or when it
// is dropped and the garbage collector has run its cleanup.
func New() *Token {
	return mint(newCell(), nil)
}

// NewContext mints a token that also dies when ctx is done. It starts no
// goroutine: the death is hooked onto ctx with [context.AfterFunc]. A token
// minted from a context that is already done is dead on return.
func NewContext(ctx context.Context) *Token {
	c := newCell()
	if ctx.Err() != nil {
		c.kill(Cancelled)
		return mint(c, nil)
	}
	stop := context.AfterFunc(ctx, func() { c.kill(Cancelled) })
	return mint(c, stop)
}

func mint(c *cell, stop func() bool) *Token {
	t := &Token{c: c, stop: stop}
	t.cleanup = runtime.AddCleanup(t, dropped, cleanupArg{c: c, stop: stop})
	return t
}

// dropped runs on the runtime's cleanup goroutine after a Token was
// collected without being released. It must not block.
func dropped(a cleanupArg) {
	a.c.kill(Dropped)
	if a.stop != nil {
		a.stop()
	}
}

// Release kills the token. It is idempotent and safe to call concurrently
// with itself, with the cancellation of the token's context and with the
// garbage collector. After it returns, every Ref of the token reads dead and
// Done is closed. It also detaches the token from its context and cancels
// the drop-path cleanup, so a released token costs nothing further.
func (t *Token) Release() {
	t.c.kill(Released)
	if t.stop != nil {
		t.stop()
	}
	t.cleanup.Stop()
}

// Releaser returns a function that kills the token as Release does, but
// that does not keep the token reachable. A goroutine that must be able to
// end its owner (a dispatcher whose route body panicked) holds the function
// rather than the Token, so that dropping the Token still kills it. The
// function is idempotent and safe for concurrent use.
func (t *Token) Releaser() func() {
	c, stop := t.c, t.stop
	return func() {
		c.kill(Released)
		if stop != nil {
			stop()
		}
	}
}

// Alive reports whether the token has not died yet.
func (t *Token) Alive() bool { return t.c.state.Load() != stateDead }

// Ref returns a weak view of the token. The view does not keep the token
// reachable. Every call returns an equal Ref.
func (t *Token) Ref() Ref { return Ref{c: t.c} }

// Done returns a channel that is closed when the token dies, by any path.
func (t *Token) Done() <-chan struct{} { return t.c.done }

// ID returns the token's process-unique identifier; see [Ref.ID].
func (t *Token) ID() uint64 { return t.c.id }

// Run mints a token from ctx, calls fn with it, and releases the token when
// fn returns or panics. A panic is not recovered: the token dies, then the
// panic goes on unwinding. Run returns fn's error.
func Run(ctx context.Context, fn func(ctx context.Context, t *Token) error) error {
	t := NewContext(ctx)
	defer t.Release()
	return fn(ctx, t)
}

// Ref is a weak view of a Token: what a registry stores beside an entry.
// Refs are small comparable values, safe to copy and to use from any number
// of goroutines. The zero Ref is dead, is Same as nothing, and has ID 0.
type Ref struct {
	c *cell
}

// Alive reports whether the token behind r is still alive. It is one atomic
// load and does not allocate: cheap enough for every request.
func (r Ref) Alive() bool { return r.c != nil && r.c.state.Load() != stateDead }

// Same reports whether r and o are views of the same Token, whether that
// token is alive or dead (the equivalent of Rust's Weak::ptr_eq). It is
// identity, not equality of state: Refs of two dead tokens are not Same. The
// zero Ref is Same as nothing, not even another zero Ref.
func (r Ref) Same(o Ref) bool { return r.c != nil && r.c == o.c }

// Enter holds off the death of the token behind r until the matching Exit,
// and reports whether it took the hold. While held, a death that begins
// waits before it completes, so the token reads alive throughout. A
// registry uses it to make the publication of an entry and its owner's
// liveness one atomic step.
//
// Enter refuses, holding nothing, when the token is dead or already dying.
// A dying token still reads alive to Alive, so a caller that reports the
// refusal as a death must first wait on Done (outside any lock it holds):
// otherwise it could call the owner dead while others still see it alive.
// The wait is short, since a death waits only for holds.
//
// Hold for a few instructions only, and never do anything that may kill
// this token (Release, a cancel of its context) while holding: that death
// would wait for the hold forever.
func (r Ref) Enter() bool {
	if r.c == nil {
		return false
	}
	// Announce the hold, then look: a death flips to dying, then looks at
	// the holds, so one of the two sees the other.
	r.c.holds.Add(1)
	if testHookEntering != nil {
		testHookEntering()
	}
	if r.c.state.Load() != stateAlive {
		r.c.holds.Add(-1)
		return false
	}
	return true
}

// Exit releases a hold taken by a successful Enter. It is safe to call
// concurrently with Enter, Exit and the token's death.
//
// An Exit with no hold to release panics and changes nothing: a count taken
// below zero would make the token's death wait forever, and with it the
// process-wide death clock (see [Deaths]) and everything that waits for it
// to settle. Holds are counted, not named, so an unmatched Exit is caught
// only when no hold at all is outstanding; one that releases another
// caller's hold is caught later, by an Exit that then finds none.
func (r Ref) Exit() {
	if r.c == nil {
		panic("owner: Exit on the zero Ref, which cannot be entered")
	}
	// Compare-and-swap rather than add and undo: even a transient -1 would
	// let a concurrent Enter's hold be counted as zero by a dying token.
	for {
		n := r.c.holds.Load()
		if n <= 0 {
			panic("owner: Exit without a matching Enter")
		}
		if r.c.holds.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// ID returns a process-unique identifier of the token behind r. IDs grow
// monotonically with minting order, so an ID can serve as a fencing token
// and in logs. The zero Ref has ID 0, which no token has.
func (r Ref) ID() uint64 {
	if r.c == nil {
		return 0
	}
	return r.c.id
}

// Done returns a channel that is closed when the token behind r dies. For
// the zero Ref it returns a closed channel.
func (r Ref) Done() <-chan struct{} {
	if r.c == nil {
		return closedChan
	}
	return r.c.done
}

// closedChan is what the zero Ref's Done returns; it is never written after
// init.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
