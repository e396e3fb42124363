// Package invariant counts what a load run's checkers saw: per invariant,
// how often it was checked and how often it was violated, with the first
// few violation messages, and apart from any invariant the errors that a
// correct system does not produce. Both loadgen modes, the single-process
// one (inproc) and the fleet one (fleet),
// count with it, each over its own numbered Invariant type.
//
// The model: a checker that never checks proves nothing, so a report shows
// the check counts beside the violations; a violation is counted every
// time, but only its first MaxExamples messages are kept, since the first
// few say what went wrong and the count says how often.
package invariant

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Key is an invariant's type: a small number, 0 to MaxKeys-1 (its
// index), with the name reports key it by.
type Key interface {
	~int
	String() string
}

// MaxKeys bounds the keys a Tally counts: a key at or over it, or under
// 0, panics with an index out of range. The arrays it sizes are what lets
// the zero Tally count with one atomic add and no allocation.
const MaxKeys = 32

// MaxExamples bounds the messages kept per invariant and for errors.
const MaxExamples = 5

// Tally counts checks and violations per invariant, and unexpected errors.
// The zero Tally is ready to use. It is safe for concurrent use; counting
// a check or a violation is one atomic add, keeping one of the first
// messages takes a lock.
type Tally[K Key] struct {
	checks     [MaxKeys]atomic.Int64
	violations [MaxKeys]atomic.Int64
	errors     atomic.Int64

	mu            sync.Mutex
	examples      [MaxKeys][]string
	errorExamples []string
}

// Check counts n occasions on which inv could have been violated.
func (t *Tally[K]) Check(inv K, n int64) { t.checks[inv].Add(n) }

// Violate counts one violation of inv and keeps its message if it is
// among the first MaxExamples; the message is formatted only then.
func (t *Tally[K]) Violate(inv K, format string, args ...any) {
	if t.violations[inv].Add(1) > MaxExamples {
		return
	}
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.examples[inv] = append(t.examples[inv], msg)
	t.mu.Unlock()
}

// Unexpected counts an error that no invariant names but that fails the
// run (a Stop that times out, a start refused for no reason the checkers
// expect), keeping its message if it is among the first MaxExamples.
func (t *Tally[K]) Unexpected(format string, args ...any) {
	if t.errors.Add(1) > MaxExamples {
		return
	}
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.errorExamples = append(t.errorExamples, msg)
	t.mu.Unlock()
}

// Violations returns how often inv was violated.
func (t *Tally[K]) Violations(inv K) int64 { return t.violations[inv].Load() }

// Checks returns how often inv was checked.
func (t *Tally[K]) Checks(inv K) int64 { return t.checks[inv].Load() }

// Errors returns how many unexpected errors were counted.
func (t *Tally[K]) Errors() int64 { return t.errors.Load() }

// Examples returns a copy of the messages kept for inv, oldest first.
func (t *Tally[K]) Examples(inv K) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.examples[inv]...)
}

// ErrorExamples returns a copy of the unexpected errors' messages kept,
// oldest first.
func (t *Tally[K]) ErrorExamples() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.errorExamples...)
}

// Summary is what a report keeps of the tally for the invariants invs,
// keyed by their names: every one's violations and checks, zeros
// included, and the messages kept of those that have any (nil when none
// has).
func (t *Tally[K]) Summary(invs []K) (violations, checks map[string]int64, examples map[string][]string) {
	violations, checks = make(map[string]int64, len(invs)), make(map[string]int64, len(invs))
	for _, inv := range invs {
		violations[inv.String()] = t.Violations(inv)
		checks[inv.String()] = t.Checks(inv)
		if ex := t.Examples(inv); len(ex) > 0 {
			if examples == nil {
				examples = map[string][]string{}
			}
			examples[inv.String()] = ex
		}
	}
	return violations, checks, examples
}
