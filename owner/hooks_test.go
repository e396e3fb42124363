package owner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flagHolder is held while its flag is set, and tells the test the first
// time a death asks.
type flagHolder struct {
	held  atomic.Bool
	asked chan struct{}
	once  atomic.Bool
}

func newFlagHolder() *flagHolder { return &flagHolder{asked: make(chan struct{})} }

func (h *flagHolder) Held() bool {
	held := h.held.Load()
	if held && h.once.CompareAndSwap(false, true) {
		close(h.asked)
	}
	return held
}

// A death waits out an attached holder, and the token reads alive all the
// while: without the wait, Release would return (and the token read dead)
// while the holder is still inside its section.
func TestHoldDelaysDeath(t *testing.T) {
	tok := owner.New()
	h := newFlagHolder()
	require.True(t, tok.Ref().Hold(h))
	h.held.Store(true)

	released := make(chan struct{})
	go func() {
		tok.Release()
		close(released)
	}()
	select {
	case <-h.asked:
	case <-released:
		t.Fatal("Release completed while a holder was held")
	}
	assert.True(t, tok.Ref().Alive(), "a held death must not be visible yet")
	assert.False(t, isClosed(tok.Done()))
	h.held.Store(false)
	<-released
	assert.False(t, tok.Ref().Alive())
}

// Hold refuses a dead token and attaches nothing to it.
func TestHoldRefusesDeadToken(t *testing.T) {
	tok := owner.New()
	tok.Release()
	h := newFlagHolder()
	h.held.Store(true)
	assert.False(t, tok.Ref().Hold(h))
	assert.False(t, owner.Ref{}.Hold(h))
}

// AfterDeath runs its function once per registration, after the token reads
// dead, on every path to death, and also when registered after the death.
func TestAfterDeathEveryPath(t *testing.T) {
	paths := map[string]func() (owner.Ref, func()){
		"release": func() (owner.Ref, func()) {
			tok := owner.New()
			return tok.Ref(), tok.Release
		},
		"cancel": func() (owner.Ref, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			tok := owner.NewContext(ctx)
			t.Cleanup(tok.Release)
			return tok.Ref(), cancel
		},
		"drop": func() (owner.Ref, func()) {
			ref := owner.New().Ref()
			return ref, func() { awaitDeath(t, ref) }
		},
	}
	for name, mk := range paths {
		t.Run(name, func(t *testing.T) {
			ref, kill := mk()
			ran := make(chan bool, 3)
			ref.AfterDeath(func() { ran <- ref.Alive() })
			ref.AfterDeath(func() { ran <- ref.Alive() })
			kill()
			for range 2 {
				select {
				case alive := <-ran:
					assert.False(t, alive, "ran before the token read dead")
				case <-time.After(10 * time.Second):
					t.Fatal("an after-death function never ran")
				}
			}
			ref.AfterDeath(func() { ran <- ref.Alive() })
			assert.False(t, <-ran)
			assert.Empty(t, ran, "a function ran twice")
		})
	}
}

// Many registrations racing the death: each runs exactly once.
func TestAfterDeathRacingRelease(t *testing.T) {
	for range 200 {
		tok := owner.New()
		ref := tok.Ref()
		var runs atomic.Int64
		const n = 8
		done := make(chan struct{}, n)
		for range n {
			go func() {
				ref.AfterDeath(func() {
					runs.Add(1)
					done <- struct{}{}
				})
			}()
		}
		go tok.Release()
		for range n {
			<-done
		}
		require.EqualValues(t, n, runs.Load())
	}
}

// Each path to death records itself, and only once the token reads dead:
// a Cause that a Ref reports alongside Alive() == false is the winner's.
func TestCauseRecordsThePath(t *testing.T) {
	rel := owner.New()
	assert.Equal(t, owner.Alive, rel.Ref().Cause())
	rel.Release()
	assert.Equal(t, owner.Released, rel.Ref().Cause())

	ctx, cancel := context.WithCancel(context.Background())
	can := owner.NewContext(ctx)
	cancel()
	<-can.Done()
	assert.Equal(t, owner.Cancelled, can.Ref().Cause())
	can.Release() // a later Release does not rewrite the cause
	assert.Equal(t, owner.Cancelled, can.Ref().Cause())

	pre := owner.NewContext(ctx) // minted from a context already done
	assert.Equal(t, owner.Cancelled, pre.Ref().Cause())

	dropped := owner.New().Ref()
	awaitDeath(t, dropped)
	assert.Equal(t, owner.Dropped, dropped.Cause())

	assert.Equal(t, owner.Released, owner.Ref{}.Cause())
	assert.Equal(t, "dropped", owner.Dropped.String())
}
