package shardreg_test

import (
	"errors"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// Races between a name's old owner and its successor, scripted with the
// registry's hooks so that the bad interleaving happens on every run rather
// than in the odd run of a stress or linearizability test.

// A stop whose lock-free owner check has passed is paused there; meanwhile
// its owner dies and a successor takes the name over. The stop then arrives
// late, and must remove nothing.
//
// What it catches: an UnregisterOwned that checks the owner on the entry it
// loaded and then removes whatever is under the name (check-then-act). That
// deletes the successor's live entry: its route vanishes from the catalog
// while its consumer runs. Ownership must be decided again under the bucket
// lock.
func TestLateStopPausedWhileSuccessorTakesName(t *testing.T) {
	r := newReg(t)
	old, successor := owner.New(), live(t)
	start(t, r, "tool", old)
	paused := false
	r.SetHook(func(p shardreg.HookPoint) {
		if p != shardreg.HookUnregisterChecked || paused {
			return
		}
		paused = true
		old.Release()
		start(t, r, "tool", successor) // the takeover of the dead entry
	})
	removed := r.UnregisterOwned("tool", old.Ref())
	r.SetHook(nil)
	if !paused {
		t.Fatal("the stop never reached the point between its check and its removal: paused = false, want true")
	}

	if removed {
		t.Error("the late stop removed an entry that was no longer its owner's: removed = true, want false")
	}
	e, ok := r.Resolve("tool")
	if !ok {
		t.Fatal("the successor's entry is gone: ok = false, want true")
	}
	if !e.Owner.Same(successor.Ref()) {
		t.Error("e.Owner.Same(successor.Ref()) = false, want true")
	}
	if got := r.Len(); got != 1 {
		t.Errorf("r.Len() = %v, want 1", got)
	}
}

// The same pause with the owner dead from the start, as in a consumer's
// stop that runs after its crash: the check passes on the dead entry, a
// successor takes the name, and the stop must still remove nothing.
//
// What it catches: the check-then-act above, on the path where the stop
// was late before it began.
func TestStopOfDeadOwnerPausedWhileSuccessorTakesName(t *testing.T) {
	r := newReg(t)
	old, successor := owner.New(), live(t)
	start(t, r, "tool", old)
	old.Release()
	paused := false
	r.SetHook(func(p shardreg.HookPoint) {
		if p == shardreg.HookUnregisterChecked && !paused {
			paused = true
			start(t, r, "tool", successor)
		}
	})
	removed := r.UnregisterOwned("tool", old.Ref())
	r.SetHook(nil)
	if !paused {
		t.Fatal("paused = false, want true")
	}

	if removed {
		t.Error("the dead owner's stop removed its successor's entry: removed = true, want false")
	}
	e, ok := r.Resolve("tool")
	if !ok {
		t.Fatal("the successor's entry is gone: ok = false, want true")
	}
	if !e.Owner.Same(successor.Ref()) {
		t.Error("e.Owner.Same(successor.Ref()) = false, want true")
	}
	// Once the successor holds the name, the old owner's stop has nothing
	// left to remove, and the successor's own stop still works.
	if r.UnregisterOwned("tool", old.Ref()) {
		t.Error(`r.UnregisterOwned("tool", old.Ref()) = true, want false`)
	}
	if !r.UnregisterOwned("tool", successor.Ref()) {
		t.Error(`r.UnregisterOwned("tool", successor.Ref()) = false, want true`)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
}

// Two consumers restart the same dead route, and both read the dead
// incumbent in their lock-free pre-checks. The first is paused after its
// pre-check, before its Compute; the second takes the name over completely.
// When the first resumes, the name is held by a live owner: it must refuse
// with ErrDuplicate and leave the second's entry alone.
//
// What it catches: a takeover that replaces whatever it finds under the
// bucket lock, trusting the pre-check, instead of re-checking there that
// what it replaces is still dead. Both registers would succeed, both
// consumers would believe they own the route, and the first would silently
// overwrite the second's entry.
func TestTwoTakeoversReadTheSameDeadIncumbent(t *testing.T) {
	for _, name := range []string{"Register", "RegisterReady"} {
		t.Run(name, func(t *testing.T) {
			register := func(r *shardreg.Registry[string], v string, o owner.Ref) error {
				if name == "Register" {
					return r.Register("tool", v, o)
				}
				return r.RegisterReady("tool", v, o)
			}
			r := newReg(t, shardreg.WithCap(1))
			incumbent, first, second := owner.New(), live(t), live(t)
			start(t, r, "tool", incumbent)
			incumbent.Release()
			paused := false
			r.SetHook(func(p shardreg.HookPoint) {
				if p != shardreg.HookBeforeInsert || paused {
					return
				}
				paused = true // the first's pre-check has read the incumbent dead
				if err := register(r, "second", second.Ref()); err != nil {
					t.Fatalf("the second takeover: %v", err)
				}
			})
			err := register(r, "first", first.Ref())
			r.SetHook(nil)
			if !paused {
				t.Fatal("paused = false, want true")
			}

			if !errors.Is(err, shardreg.ErrDuplicate) {
				t.Fatalf("the first takeover replaced a live owner's entry: err = %v, want %v", err, shardreg.ErrDuplicate)
			}
			if r.MarkReady("tool", first.Ref()) {
				t.Error(`the first owns the name: r.MarkReady("tool", first.Ref()) = true, want false`)
			}
			if !r.MarkReady("tool", second.Ref()) {
				t.Fatal(`the second lost the name: r.MarkReady("tool", second.Ref()) = false, want true`)
			}
			e, ok := r.Resolve("tool")
			if !ok {
				t.Fatal(`r.Resolve("tool"): ok = false, want true`)
			}
			if !e.Owner.Same(second.Ref()) {
				t.Error("e.Owner.Same(second.Ref()) = false, want true")
			}
			if e.Value != "second" {
				t.Errorf(`e.Value = %q, want "second"`, e.Value)
			}
			if got := r.Len(); got != 1 {
				t.Errorf("a takeover takes no second slot: r.Len() = %v, want 1", got)
			}
		})
	}
}
