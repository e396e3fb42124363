package owner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/owner"
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
	if !tok.Ref().Hold(h) {
		t.Fatal("tok.Ref().Hold(h) = false, want true")
	}
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
	if !tok.Ref().Alive() {
		t.Error("a held death must not be visible yet: tok.Ref().Alive() = false, want true")
	}
	if isClosed(tok.Done()) {
		t.Error("isClosed(tok.Done()) = true, want false")
	}
	h.held.Store(false)
	<-released
	if tok.Ref().Alive() {
		t.Error("tok.Ref().Alive() = true, want false")
	}
}

// Hold refuses a dead token and attaches nothing to it.
func TestHoldRefusesDeadToken(t *testing.T) {
	tok := owner.New()
	tok.Release()
	h := newFlagHolder()
	h.held.Store(true)
	if tok.Ref().Hold(h) {
		t.Error("tok.Ref().Hold(h) = true, want false")
	}
	if (owner.Ref{}.Hold(h)) {
		t.Error("owner.Ref{}.Hold(h) = true, want false")
	}
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
					if alive {
						t.Error("ran before the token read dead: alive = true, want false")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("an after-death function never ran")
				}
			}
			ref.AfterDeath(func() { ran <- ref.Alive() })
			if <-ran {
				t.Error("received true from ran, want false")
			}
			if n := len(ran); n != 0 {
				t.Errorf("a function ran twice: len(ran) = %d, want 0", n)
			}
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
		if got := runs.Load(); got != n {
			t.Fatalf("%d after-death functions ran, want %d: each runs exactly once", got, n)
		}
	}
}

// Each path to death records itself, and only once the token reads dead:
// a Cause that a Ref reports alongside Alive() == false is the winner's.
func TestCauseRecordsThePath(t *testing.T) {
	rel := owner.New()
	if got := rel.Ref().Cause(); got != owner.Alive {
		t.Errorf("rel.Ref().Cause() = %v, want %v", got, owner.Alive)
	}
	rel.Release()
	if got := rel.Ref().Cause(); got != owner.Released {
		t.Errorf("rel.Ref().Cause() = %v, want %v", got, owner.Released)
	}

	ctx, cancel := context.WithCancel(context.Background())
	can := owner.NewContext(ctx)
	cancel()
	<-can.Done()
	if got := can.Ref().Cause(); got != owner.Cancelled {
		t.Errorf("can.Ref().Cause() = %v, want %v", got, owner.Cancelled)
	}
	can.Release() // a later Release does not rewrite the cause
	if got := can.Ref().Cause(); got != owner.Cancelled {
		t.Errorf("can.Ref().Cause() = %v, want %v", got, owner.Cancelled)
	}

	pre := owner.NewContext(ctx) // minted from a context already done
	if got := pre.Ref().Cause(); got != owner.Cancelled {
		t.Errorf("pre.Ref().Cause() = %v, want %v", got, owner.Cancelled)
	}

	dropped := owner.New().Ref()
	awaitDeath(t, dropped)
	if got := dropped.Cause(); got != owner.Dropped {
		t.Errorf("dropped.Cause() = %v, want %v", got, owner.Dropped)
	}

	if got := (owner.Ref{}.Cause()); got != owner.Released {
		t.Errorf("owner.Ref{}.Cause() = %v, want %v", got, owner.Released)
	}
	if got := owner.Dropped.String(); got != "dropped" {
		t.Errorf(`owner.Dropped.String() = %q, want "dropped"`, got)
	}
}
