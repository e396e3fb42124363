package invariant

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
)

type inv int

const (
	invA inv = iota + 1
	invB
	invC
)

var names = [...]string{"", "a", "b", "c"}

func (i inv) String() string { return names[i] }

func TestTallyCounts(t *testing.T) {
	tests := []struct {
		name                 string
		checks, violate, err int
		wantExamples         int
		wantErrExamples      int
	}{
		{"nothing", 0, 0, 0, 0, 0},
		{"checks only", 7, 0, 0, 0, 0},
		{"a few violations keep every message", 3, 2, 1, 2, 1},
		{"exactly the bound", 1, MaxExamples, MaxExamples, MaxExamples, MaxExamples},
		{"past the bound counts all, keeps the first", 1, MaxExamples + 4, MaxExamples + 2, MaxExamples, MaxExamples},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl Tally[inv]
			for range tt.checks {
				tl.Check(invB, 2)
			}
			for i := range tt.violate {
				tl.Violate(invB, "violation %d", i)
			}
			for i := range tt.err {
				tl.Unexpected("error %d", i)
			}
			if got, want := tl.Checks(invB), int64(2*tt.checks); got != want {
				t.Errorf("Checks = %d, want %d", got, want)
			}
			if got := tl.Violations(invB); got != int64(tt.violate) {
				t.Errorf("Violations = %d, want %d", got, tt.violate)
			}
			if got := tl.Errors(); got != int64(tt.err) {
				t.Errorf("Errors = %d, want %d", got, tt.err)
			}
			ex := tl.Examples(invB)
			if len(ex) != tt.wantExamples {
				t.Fatalf("Examples = %q, want %d of them", ex, tt.wantExamples)
			}
			for i, m := range ex {
				if want := fmt.Sprintf("violation %d", i); m != want {
					t.Errorf("example %d = %q, want %q (the first ones, in order)", i, m, want)
				}
			}
			errs := tl.ErrorExamples()
			if len(errs) != tt.wantErrExamples {
				t.Fatalf("ErrorExamples = %q, want %d of them", errs, tt.wantErrExamples)
			}
			for i, m := range errs {
				if want := fmt.Sprintf("error %d", i); m != want {
					t.Errorf("error example %d = %q, want %q", i, m, want)
				}
			}
			if tl.Checks(invA)+tl.Violations(invA)+tl.Checks(invC)+tl.Violations(invC) != 0 || len(tl.Examples(invA)) != 0 {
				t.Errorf("counting invariant b touched a or c")
			}
		})
	}
}

func TestTallyExamplesAreCopies(t *testing.T) {
	var tl Tally[inv]
	tl.Violate(invA, "first")
	tl.Unexpected("oops")
	tl.Examples(invA)[0] = "changed"
	tl.ErrorExamples()[0] = "changed"
	if got := tl.Examples(invA); got[0] != "first" {
		t.Errorf("Examples = %q after a caller changed its copy", got)
	}
	if got := tl.ErrorExamples(); got[0] != "oops" {
		t.Errorf("ErrorExamples = %q after a caller changed its copy", got)
	}
}

func TestTallySummary(t *testing.T) {
	tests := []struct {
		name       string
		record     func(*Tally[inv])
		invs       []inv
		violations map[string]int64
		checks     map[string]int64
		examples   map[string][]string
	}{
		{
			name:       "zeros included, no examples",
			record:     func(tl *Tally[inv]) { tl.Check(invA, 3) },
			invs:       []inv{invA, invB},
			violations: map[string]int64{"a": 0, "b": 0},
			checks:     map[string]int64{"a": 3, "b": 0},
		},
		{
			name: "examples only of those violated",
			record: func(tl *Tally[inv]) {
				tl.Check(invC, 1)
				tl.Violate(invC, "c broke %d", 1)
			},
			invs:       []inv{invA, invB, invC},
			violations: map[string]int64{"a": 0, "b": 0, "c": 1},
			checks:     map[string]int64{"a": 0, "b": 0, "c": 1},
			examples:   map[string][]string{"c": {"c broke 1"}},
		},
		{
			name: "only the invariants asked for",
			record: func(tl *Tally[inv]) {
				tl.Violate(invA, "a broke")
				tl.Check(invB, 2)
			},
			invs:       []inv{invB},
			violations: map[string]int64{"b": 0},
			checks:     map[string]int64{"b": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl Tally[inv]
			tt.record(&tl)
			v, c, ex := tl.Summary(tt.invs)
			if !reflect.DeepEqual(v, tt.violations) {
				t.Errorf("violations = %v, want %v", v, tt.violations)
			}
			if !reflect.DeepEqual(c, tt.checks) {
				t.Errorf("checks = %v, want %v", c, tt.checks)
			}
			if !reflect.DeepEqual(ex, tt.examples) {
				t.Errorf("examples = %#v, want %#v", ex, tt.examples)
			}
		})
	}
}

// TestTallyConcurrent counts from many goroutines at once: no count is
// lost and no more than MaxExamples messages are kept (run with -race).
func TestTallyConcurrent(t *testing.T) {
	const goroutines, each = 8, 200
	var tl Tally[inv]
	var wg sync.WaitGroup
	start := make(chan struct{}) // so that the first messages come from different goroutines
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range each {
				tl.Check(invA, 1)
				tl.Violate(invA, "g%d i%d", g, i)
				tl.Unexpected("g%d i%d", g, i)
				runtime.Gosched() // interleave the goroutines' first messages
			}
		})
	}
	close(start)
	wg.Wait()
	const n = goroutines * each
	if tl.Checks(invA) != n || tl.Violations(invA) != n || tl.Errors() != n {
		t.Errorf("checks %d, violations %d, errors %d, want %d each", tl.Checks(invA), tl.Violations(invA), tl.Errors(), n)
	}
	if len(tl.Examples(invA)) != MaxExamples || len(tl.ErrorExamples()) != MaxExamples {
		t.Errorf("kept %d examples and %d errors, want %d each", len(tl.Examples(invA)), len(tl.ErrorExamples()), MaxExamples)
	}
}
