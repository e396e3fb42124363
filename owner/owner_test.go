package owner_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDeathPaths(t *testing.T) {
	tests := []struct {
		name string
		// kill mints a token, takes a Ref, and kills the token by one path.
		kill func(t *testing.T) owner.Ref
	}{
		{"release", func(t *testing.T) owner.Ref {
			tok := owner.New()
			r := tok.Ref()
			if !r.Alive() {
				t.Fatal("r.Alive() = false, want true")
			}
			tok.Release()
			return r
		}},
		{"context cancel", func(t *testing.T) owner.Ref {
			ctx, cancel := context.WithCancel(context.Background())
			tok := owner.NewContext(ctx)
			r := tok.Ref()
			if !r.Alive() {
				t.Fatal("r.Alive() = false, want true")
			}
			cancel()
			// AfterFunc runs the death on its own goroutine.
			<-r.Done()
			runtime.KeepAlive(tok)
			return r
		}},
		{"context already done", func(t *testing.T) owner.Ref {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			tok := owner.NewContext(ctx)
			if tok.Alive() {
				t.Fatal("a token minted from a done context must be dead on return: tok.Alive() = true, want false")
			}
			return tok.Ref()
		}},
		{"panic unwinds Run", func(t *testing.T) owner.Ref {
			var r owner.Ref
			v := recovered(func() {
				_ = owner.Run(context.Background(), func(_ context.Context, tok *owner.Token) error {
					r = tok.Ref()
					if !r.Alive() {
						t.Fatal("the token reads dead inside Run")
					}
					panic("boom")
				})
			})
			if v != "boom" {
				t.Fatalf("Run panicked with %v, want the body's panic \"boom\" to unwind through it", v)
			}
			return r
		}},
		{"Run returns", func(t *testing.T) owner.Ref {
			var r owner.Ref
			errFn := errors.New("fn failed")
			err := owner.Run(context.Background(), func(_ context.Context, tok *owner.Token) error {
				r = tok.Ref()
				if !r.Alive() {
					t.Fatal("r.Alive() = false, want true")
				}
				return errFn
			})
			if !errors.Is(err, errFn) {
				t.Fatalf("err = %v, want %v", err, errFn)
			}
			return r
		}},
		{"releaser", func(t *testing.T) owner.Ref {
			tok := owner.New()
			release := tok.Releaser()
			release()
			release()
			return tok.Ref()
		}},
		{"dropped while its releaser is held", func(t *testing.T) owner.Ref {
			release, r := releaserOfDropped()
			awaitDeath(t, r)
			release() // a late call on a dead token changes nothing
			return r
		}},
		{"dropped", func(t *testing.T) owner.Ref {
			r := mintAndDrop(context.Background())
			awaitDeath(t, r)
			return r
		}},
		{"dropped, minted from a live context", func(t *testing.T) owner.Ref {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := mintAndDrop(ctx)
			awaitDeath(t, r)
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := completed(t)
			r := tt.kill(t)
			if r.Alive() {
				t.Error("Ref reads alive after death: r.Alive() = true, want false")
			}
			if !isClosed(r.Done()) {
				t.Error("Done not closed after death: isClosed(r.Done()) = false, want true")
			}
			if got := completed(t); got != before+1 {
				t.Errorf("the death clock must count this death exactly once: completed(t) = %v, want %v", got, before+1)
			}
		})
	}
}

// mintAndDrop returns a Ref to a token that nothing references any more.
//
//go:noinline
func mintAndDrop(ctx context.Context) owner.Ref {
	return owner.NewContext(ctx).Ref()
}

// releaserOfDropped returns the releaser and a Ref of a token that nothing
// else references: the releaser must not keep it reachable.
//
//go:noinline
func releaserOfDropped() (func(), owner.Ref) {
	tok := owner.New()
	return tok.Releaser(), tok.Ref()
}

// A Ref must not keep its Token reachable; many Refs and copies of them must
// not either.
func TestRefDoesNotKeepTokenReachable(t *testing.T) {
	refs := make([]owner.Ref, 64)
	for i := range refs {
		refs[i] = mintAndDrop(context.Background())
	}
	held := append([]owner.Ref(nil), refs...)
	for _, r := range refs {
		awaitDeath(t, r)
	}
	for _, r := range held {
		if r.Alive() {
			t.Error("r.Alive() = true, want false")
		}
	}
}

// Release racing with itself, with the context's cancellation and with the
// garbage collector kills the token exactly once.
func TestConcurrentDeathsCountOnce(t *testing.T) {
	const tokens, releasers = 200, 8
	before := completed(t)
	for range tokens {
		ctx, cancel := context.WithCancel(context.Background())
		tok := owner.NewContext(ctx)
		r := tok.Ref()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range releasers {
			wg.Go(func() { <-start; tok.Release() })
		}
		wg.Go(func() { <-start; cancel() })
		wg.Go(func() { <-start; runtime.GC() })
		close(start)
		wg.Wait()
		if r.Alive() {
			t.Fatal("r.Alive() = true, want false")
		}
		if !isClosed(r.Done()) {
			t.Fatal("isClosed(r.Done()) = false, want true")
		}
	}
	// Cancellation may have won some races; its AfterFunc goroutine has
	// finished its death before Done closed, but may still be returning.
	eventually(t, 5*time.Second, func() bool {
		c, settled := owner.Deaths()
		return settled && c == before+tokens
	}, fmt.Sprintf("the death clock settles at %d completed deaths: each of %d tokens dies exactly once", before+tokens, tokens))
}

// Between a death's flip and its completion, the clock reads unsettled with
// the old completed count, and the Ref already reads dead. This is the
// window that makes a registry sweep rather than trust an unchanged count.
func TestDeathsInProgressWindow(t *testing.T) {
	before := completed(t)
	tok := owner.New()
	r := tok.Ref()

	type reading struct {
		completed uint64
		settled   bool
		alive     bool
	}
	var inside reading
	restore := owner.SetDeathFlippedHook(func() {
		c, s := owner.Deaths()
		inside = reading{c, s, r.Alive()}
	})
	tok.Release()
	restore()

	if inside != (reading{completed: before, settled: false, alive: false}) {
		t.Errorf("inside = %v, want %v", inside, reading{completed: before, settled: false, alive: false})
	}
	if got := completed(t); got != before+1 {
		t.Errorf("completed(t) = %v, want %v", got, before+1)
	}
}

// A second death held in the window keeps the clock unsettled even after
// another death completes: settled means no death at all is in progress.
func TestDeathsSettledNeedsEveryDeathDone(t *testing.T) {
	before := completed(t)
	held, other := owner.New(), owner.New()
	entered, resume := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	restore := owner.SetDeathFlippedHook(func() {
		if calls.Add(1) == 1 {
			close(entered)
			<-resume
		}
	})
	defer restore()

	done := make(chan struct{})
	go func() { held.Release(); close(done) }()
	<-entered
	other.Release()
	c, settled := owner.Deaths()
	if c != before+1 {
		t.Errorf("the other death completed: c = %v, want %v", c, before+1)
	}
	if settled {
		t.Error("the held death is still in progress: settled = true, want false")
	}
	close(resume)
	<-done
	c, settled = owner.Deaths()
	if c != before+2 {
		t.Errorf("c = %v, want %v", c, before+2)
	}
	if !settled {
		t.Error("settled = false, want true")
	}
}

func TestSameIsIdentity(t *testing.T) {
	a, b := owner.New(), owner.New()
	ra, rb := a.Ref(), b.Ref()
	if !ra.Same(a.Ref()) {
		t.Error("Refs of one token are Same: ra.Same(a.Ref()) = false, want true")
	}
	if got := a.Ref(); got != ra {
		t.Errorf("Refs of one token are equal values: a.Ref() = %+v, want %+v", got, ra)
	}
	if ra.Same(rb) {
		t.Error("ra.Same(rb) = true, want false")
	}

	a.Release()
	b.Release()
	if !ra.Same(ra) {
		t.Error("a Ref is Same as itself after death: ra.Same(ra) = false, want true")
	}
	if ra.Same(rb) {
		t.Error("two dead tokens' Refs are not Same: ra.Same(rb) = true, want false")
	}

	var zero owner.Ref
	if zero.Same(zero) {
		t.Error("the zero Ref is Same as nothing: zero.Same(zero) = true, want false")
	}
	if zero.Same(ra) {
		t.Error("zero.Same(ra) = true, want false")
	}
	if ra.Same(zero) {
		t.Error("ra.Same(zero) = true, want false")
	}
}

func TestZeroRef(t *testing.T) {
	var zero owner.Ref
	if zero.Alive() {
		t.Error("zero.Alive() = true, want false")
	}
	if !isClosed(zero.Done()) {
		t.Error("isClosed(zero.Done()) = false, want true")
	}
	if got := zero.ID(); got != 0 {
		t.Errorf("zero.ID() = %v, want 0", got)
	}
}

func TestIDsAreUniqueAndMonotonic(t *testing.T) {
	var last uint64
	for range 100 {
		tok := owner.New()
		id := tok.Ref().ID()
		if got := tok.ID(); got != id {
			t.Errorf("tok.ID() = %v, want %v", got, id)
		}
		if id <= last {
			t.Errorf("id = %v, want > %v", id, last)
		}
		last = id
		tok.Release()
		if got := tok.Ref().ID(); got != id {
			t.Errorf("the ID survives death: tok.Ref().ID() = %v, want %v", got, id)
		}
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	before := completed(t)
	tok := owner.New()
	for range 3 {
		tok.Release()
	}
	if tok.Alive() {
		t.Error("tok.Alive() = true, want false")
	}
	if !isClosed(tok.Done()) {
		t.Error("isClosed(tok.Done()) = false, want true")
	}
	if got := completed(t); got != before+1 {
		t.Errorf("completed(t) = %v, want %v", got, before+1)
	}
}

// Cancelling the context of a token that was already released is not a
// second death.
func TestCancelAfterRelease(t *testing.T) {
	before := completed(t)
	ctx, cancel := context.WithCancel(context.Background())
	tok := owner.NewContext(ctx)
	tok.Release()
	cancel()
	if got := completed(t); got != before+1 {
		t.Errorf("completed(t) = %v, want %v", got, before+1)
	}
}

func TestRunGivesTheTokenTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := owner.Run(ctx, func(ctx context.Context, tok *owner.Token) error {
		if !tok.Alive() {
			t.Fatal("tok.Alive() = false, want true")
		}
		cancel() // a supervisor aborting the consumer
		<-tok.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want %v", err, context.Canceled)
	}
}

func TestRefAliveDoesNotAllocate(t *testing.T) {
	tok := owner.New()
	defer tok.Release()
	r := tok.Ref()
	var sink bool
	allocs := testing.AllocsPerRun(1000, func() { sink = r.Alive() && r.Same(r) })
	if allocs != 0 {
		t.Errorf("allocs = %v, want 0", allocs)
	}
	if !sink {
		t.Error("sink = false, want true")
	}
}

// A Release that loses the race to another returns only once the token
// reads dead, as Release promises.
func TestLosingReleaseReturnsDead(t *testing.T) {
	for range 2000 {
		tok := owner.New()
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				<-start
				tok.Release()
				if tok.Alive() {
					t.Error("Release returned while the token read alive")
				}
			})
		}
		close(start)
		wg.Wait()
	}
}

// A hold keeps a dying token reading alive until it is released; a dead or
// dying token cannot be entered.
func TestEnterHoldsDeathOff(t *testing.T) {
	tok := owner.New()
	r := tok.Ref()
	if !r.Enter() {
		t.Fatal("r.Enter() = false, want true")
	}
	released := make(chan struct{})
	go func() { tok.Release(); close(released) }()
	// A dying token cannot be entered: wait until Enter refuses.
	eventually(t, 5*time.Second, func() bool {
		if r.Enter() {
			r.Exit()
			return false
		}
		return true
	}, "Enter is refused once the death has begun")
	_, settled := owner.Deaths()
	if settled {
		t.Error("the death is in progress on the clock: settled = true, want false")
	}
	if !r.Alive() {
		t.Error("held: the token still reads alive: r.Alive() = false, want true")
	}
	select {
	case <-released:
		t.Fatal("the death completed while held")
	default:
	}
	r.Exit()
	<-released
	if r.Alive() {
		t.Error("r.Alive() = true, want false")
	}
	if r.Enter() {
		t.Error("a dead token cannot be entered: r.Enter() = true, want false")
	}
	if (owner.Ref{}.Enter()) {
		t.Error("owner.Ref{}.Enter() = true, want false")
	}
}
