package owner_test

import (
	"testing"

	"github.com/livereg/livereg/owner"
)

const unmatchedExit = "owner: Exit without a matching Enter"

// An Exit with no hold outstanding panics with the package's prefix and
// changes nothing: the token still dies when released, the death clock
// settles, and holds taken afterwards work.
//
// It catches an Exit that decrements blindly (no panic; the count goes to
// -1 and the release below would wait forever, so require stops the test
// first), and one that panics only after decrementing (the Enter/Exit pair
// taken after the misuse then panics, since its Exit finds the count at
// zero).
func TestUnmatchedExitPanicsAndHarmsNothing(t *testing.T) {
	tests := []struct {
		name string
		// misuse leaves the token alive with no hold outstanding and returns
		// the Exit that has nothing to release.
		misuse func(t *testing.T, r owner.Ref) func()
	}{
		{"never entered", func(t *testing.T, r owner.Ref) func() { return r.Exit }},
		{"one Exit too many", func(t *testing.T, r owner.Ref) func() {
			if !r.Enter() {
				t.Fatal("r.Enter() = false, want true")
			}
			r.Exit()
			return r.Exit
		}},
		{"after several holds", func(t *testing.T, r owner.Ref) func() {
			for range 3 {
				if !r.Enter() {
					t.Fatal("r.Enter() = false, want true")
				}
			}
			for range 3 {
				r.Exit()
			}
			return r.Exit
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := completed(t)
			tok := owner.New()
			r := tok.Ref()
			if v := recovered(tt.misuse(t, r)); v != unmatchedExit {
				t.Fatalf("the misuse panicked with %v, want %q", v, unmatchedExit)
			}
			if !r.Alive() {
				t.Fatal("the misuse must not touch the token's state: r.Alive() = false, want true")
			}

			if !r.Enter() {
				t.Fatal("a hold after the misuse: r.Enter() = false, want true")
			}
			if v := recovered(r.Exit); v != nil {
				t.Fatalf("Exit after a matched Enter panicked with %v: the misuse left the count below zero", v)
			}

			tok.Release() // would wait forever on a count below zero
			if r.Alive() {
				t.Error("r.Alive() = true, want false")
			}
			if got := completed(t); got != before+1 {
				t.Errorf("the death clock settles: completed(t) = %v, want %v", got, before+1)
			}
		})
	}
}

// Exit on a Ref whose Enter was refused is unmatched too: on a dead token
// and on the zero Ref, which can never be entered.
func TestExitAfterRefusedEnterPanics(t *testing.T) {
	before := completed(t)
	tok := owner.New()
	r := tok.Ref()
	tok.Release()
	if r.Enter() {
		t.Fatal("r.Enter() = true, want false")
	}
	if v := recovered(r.Exit); v != unmatchedExit {
		t.Errorf("Exit after a refused Enter on a dead token panicked with %v, want %q", v, unmatchedExit)
	}
	if got := completed(t); got != before+1 {
		t.Errorf("the misuse moved the death clock: completed(t) = %v, want %v", got, before+1)
	}

	var zero owner.Ref
	if zero.Enter() {
		t.Fatal("zero.Enter() = true, want false")
	}
	const zeroExit = "owner: Exit on the zero Ref, which cannot be entered"
	if v := recovered(zero.Exit); v != zeroExit {
		t.Errorf("Exit on the zero Ref panicked with %v, want %q", v, zeroExit)
	}
}
