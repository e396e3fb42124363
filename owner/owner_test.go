package owner_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// completed reads the completed half of the death clock once it settles.
// Tests in this package never run in parallel and wait for every token
// they drop, so the clock moves only by the deaths each test causes; but a
// death counts itself completed a moment after its token reads dead (on
// the cleanup goroutine, for a dropped one), so the read waits for that,
// within a bound.
func completed(t *testing.T) uint64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		c, settled := owner.Deaths()
		if settled {
			return c
		}
		require.False(t, time.Now().After(deadline), "a death stays in progress")
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// awaitDeath collects garbage until r reads dead, and fails the test if it
// never does. Cleanups run asynchronously after a collection, so one GC is
// not enough; the bound is generous because CI machines are slow.
func awaitDeath(t *testing.T, r owner.Ref) {
	t.Helper()
	for range 1000 {
		runtime.GC()
		select {
		case <-r.Done():
			require.False(t, r.Alive(), "Done closed but Ref reads alive")
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("a dropped token's Ref still reads alive after 1000 garbage collections")
}

func TestDeathPaths(t *testing.T) {
	tests := []struct {
		name string
		// kill mints a token, takes a Ref, and kills the token by one path.
		kill func(t *testing.T) owner.Ref
	}{
		{"release", func(t *testing.T) owner.Ref {
			tok := owner.New()
			r := tok.Ref()
			require.True(t, r.Alive())
			tok.Release()
			return r
		}},
		{"context cancel", func(t *testing.T) owner.Ref {
			ctx, cancel := context.WithCancel(context.Background())
			tok := owner.NewContext(ctx)
			r := tok.Ref()
			require.True(t, r.Alive())
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
			require.False(t, tok.Alive(), "a token minted from a done context must be dead on return")
			return tok.Ref()
		}},
		{"panic unwinds Run", func(t *testing.T) owner.Ref {
			var r owner.Ref
			require.PanicsWithValue(t, "boom", func() {
				_ = owner.Run(context.Background(), func(_ context.Context, tok *owner.Token) error {
					r = tok.Ref()
					require.True(t, r.Alive())
					panic("boom")
				})
			})
			return r
		}},
		{"Run returns", func(t *testing.T) owner.Ref {
			var r owner.Ref
			errFn := errors.New("fn failed")
			err := owner.Run(context.Background(), func(_ context.Context, tok *owner.Token) error {
				r = tok.Ref()
				require.True(t, r.Alive())
				return errFn
			})
			require.ErrorIs(t, err, errFn)
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
			assert.False(t, r.Alive(), "Ref reads alive after death")
			assert.True(t, isClosed(r.Done()), "Done not closed after death")
			assert.Equal(t, before+1, completed(t), "the death clock must count this death exactly once")
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
		assert.False(t, r.Alive())
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
		require.False(t, r.Alive())
		require.True(t, isClosed(r.Done()))
	}
	// Cancellation may have won some races; its AfterFunc goroutine has
	// finished its death before Done closed, but may still be returning.
	require.Eventually(t, func() bool {
		c, settled := owner.Deaths()
		return settled && c == before+tokens
	}, 5*time.Second, time.Millisecond, "each of %d tokens must die exactly once", tokens)
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

	assert.Equal(t, reading{completed: before, settled: false, alive: false}, inside)
	assert.Equal(t, before+1, completed(t))
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
	assert.Equal(t, before+1, c, "the other death completed")
	assert.False(t, settled, "the held death is still in progress")
	close(resume)
	<-done
	c, settled = owner.Deaths()
	assert.Equal(t, before+2, c)
	assert.True(t, settled)
}

func TestSameIsIdentity(t *testing.T) {
	a, b := owner.New(), owner.New()
	ra, rb := a.Ref(), b.Ref()
	assert.True(t, ra.Same(a.Ref()), "Refs of one token are Same")
	assert.Equal(t, ra, a.Ref(), "Refs of one token are equal values")
	assert.False(t, ra.Same(rb))

	a.Release()
	b.Release()
	assert.True(t, ra.Same(ra), "a Ref is Same as itself after death")
	assert.False(t, ra.Same(rb), "two dead tokens' Refs are not Same")

	var zero owner.Ref
	assert.False(t, zero.Same(zero), "the zero Ref is Same as nothing")
	assert.False(t, zero.Same(ra))
	assert.False(t, ra.Same(zero))
}

func TestZeroRef(t *testing.T) {
	var zero owner.Ref
	assert.False(t, zero.Alive())
	assert.True(t, isClosed(zero.Done()))
	assert.Zero(t, zero.ID())
}

func TestIDsAreUniqueAndMonotonic(t *testing.T) {
	var last uint64
	for range 100 {
		tok := owner.New()
		id := tok.Ref().ID()
		assert.Equal(t, id, tok.ID())
		assert.Greater(t, id, last)
		last = id
		tok.Release()
		assert.Equal(t, id, tok.Ref().ID(), "the ID survives death")
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	before := completed(t)
	tok := owner.New()
	for range 3 {
		tok.Release()
	}
	assert.False(t, tok.Alive())
	assert.True(t, isClosed(tok.Done()))
	assert.Equal(t, before+1, completed(t))
}

// Cancelling the context of a token that was already released is not a
// second death.
func TestCancelAfterRelease(t *testing.T) {
	before := completed(t)
	ctx, cancel := context.WithCancel(context.Background())
	tok := owner.NewContext(ctx)
	tok.Release()
	cancel()
	assert.Equal(t, before+1, completed(t))
}

func TestRunGivesTheTokenTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := owner.Run(ctx, func(ctx context.Context, tok *owner.Token) error {
		require.True(t, tok.Alive())
		cancel() // a supervisor aborting the consumer
		<-tok.Done()
		return ctx.Err()
	})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRefAliveDoesNotAllocate(t *testing.T) {
	tok := owner.New()
	defer tok.Release()
	r := tok.Ref()
	var sink bool
	allocs := testing.AllocsPerRun(1000, func() { sink = r.Alive() && r.Same(r) })
	assert.Zero(t, allocs)
	assert.True(t, sink)
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
	require.True(t, r.Enter())
	released := make(chan struct{})
	go func() { tok.Release(); close(released) }()
	// A dying token cannot be entered: wait until Enter refuses.
	require.Eventually(t, func() bool {
		if r.Enter() {
			r.Exit()
			return false
		}
		return true
	}, 5*time.Second, time.Millisecond, "the death has begun")
	_, settled := owner.Deaths()
	assert.False(t, settled, "the death is in progress on the clock")
	assert.True(t, r.Alive(), "held: the token still reads alive")
	select {
	case <-released:
		t.Fatal("the death completed while held")
	default:
	}
	r.Exit()
	<-released
	assert.False(t, r.Alive())
	assert.False(t, r.Enter(), "a dead token cannot be entered")
	assert.False(t, owner.Ref{}.Enter())
}
