package owner_test

import (
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.True(t, r.Enter())
			r.Exit()
			return r.Exit
		}},
		{"after several holds", func(t *testing.T, r owner.Ref) func() {
			for range 3 {
				require.True(t, r.Enter())
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
			require.PanicsWithValue(t, unmatchedExit, tt.misuse(t, r))
			require.True(t, r.Alive(), "the misuse must not touch the token's state")

			require.True(t, r.Enter(), "a hold after the misuse")
			require.NotPanics(t, r.Exit, "the misuse left the count below zero")

			tok.Release() // would wait forever on a count below zero
			assert.False(t, r.Alive())
			assert.Equal(t, before+1, completed(t), "the death clock settles")
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
	require.False(t, r.Enter())
	assert.PanicsWithValue(t, unmatchedExit, r.Exit)
	assert.Equal(t, before+1, completed(t), "the misuse moved the death clock")

	var zero owner.Ref
	require.False(t, zero.Enter())
	assert.PanicsWithValue(t, "owner: Exit on the zero Ref, which cannot be entered", zero.Exit)
}
