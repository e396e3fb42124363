package bindsec_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

// registerAndRelease registers n plans under fresh names, each by an owner
// that is released right after, as consumers that start and die would.
func registerAndRelease(t *testing.T, b *bindsec.Book, prefix string, n int) {
	t.Helper()
	for i := range n {
		tok := owner.New()
		if err := b.RegisterPlan(fmt.Sprintf("%s-%d", prefix, i), adminPlan, tok.Ref()); err != nil {
			t.Fatal(err)
		}
		tok.Release()
	}
}

// Prune removes every dead plan, and only those. It catches a Prune that
// reclaims nothing and one that also removes live plans.
func TestPruneRemovesDeadPlansOnly(t *testing.T) {
	b := bindsec.NewBook()
	// Fewer than the sweep interval, so that only Prune can reclaim them.
	const dead, alive = bindsec.MinSweepEvery / 2, 10
	registerAndRelease(t, b, "dead", dead)
	tok := live(t)
	for i := range alive {
		if err := b.RegisterPlan(fmt.Sprintf("live-%d", i), adminPlan, tok.Ref()); err != nil {
			t.Fatal(err)
		}
	}

	if got := b.Prune(); got != dead {
		t.Errorf("b.Prune() = %v, want dead", got)
	}
	if got := b.Prune(); got != 0 {
		t.Errorf("a second Prune finds nothing: b.Prune() = %v, want 0", got)
	}
	for i := range alive {
		_, ok := b.PlanFor(fmt.Sprintf("live-%d", i))
		if !ok {
			t.Errorf("live plan %d was pruned: ok is false", i)
		}
	}
}

// A book used on its own, with no Prune and no listing, does not hold the
// plans of every owner that ever died: registrations sweep them. 10,000
// plans registered and released leave at most one sweep interval of dead
// plans behind. It catches a book that never sweeps (Prune would find all
// 10,000) and a sweep that removes live plans.
func TestRegistrationsSweepDeadPlans(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("takeover=%v", takeover), func(t *testing.T) {
			b := bindsec.NewBook()
			tok := live(t)
			const alive, dead = 100, 10_000
			for i := range alive {
				if err := b.RegisterPlan(fmt.Sprintf("live-%d", i), adminPlan, tok.Ref()); err != nil {
					t.Fatal(err)
				}
			}
			for i := range dead {
				o := owner.New()
				name := fmt.Sprintf("dead-%d", i)
				if takeover {
					if err := b.RegisterPlanTakeover(name, adminPlan, o.Ref()); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := b.RegisterPlan(name, adminPlan, o.Ref()); err != nil {
						t.Fatal(err)
					}
				}
				o.Release()
			}

			// The interval is the larger of MinSweepEvery and the live plans
			// counted at the last sweep; here MinSweepEvery.
			left := b.Prune()
			if left > bindsec.MinSweepEvery {
				t.Errorf("dead plans outlived the sweeps: left = %v, want <= %v", left, bindsec.MinSweepEvery)
			}
			for i := range alive {
				_, ok := b.PlanFor(fmt.Sprintf("live-%d", i))
				if !ok {
					t.Errorf("live plan %d was swept: ok is false", i)
				}
			}
		})
	}
}

// Registrations that sweep from many goroutines at once, beside Prune and
// lookups, lose no live plan. Run under -race it also checks the sweep's
// bookkeeping.
func TestConcurrentSweepsKeepLivePlans(t *testing.T) {
	b := bindsec.NewBook()
	const workers, each = 4, 2 * bindsec.MinSweepEvery
	var wg sync.WaitGroup
	for w := range workers {
		tok := live(t)
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("w%d-%d", w, i)
				if i%2 == 0 {
					o := owner.New()
					if err := b.RegisterPlan(name, adminPlan, o.Ref()); err != nil {
						t.Error(err)
					}
					o.Release()
					continue
				}
				if err := b.RegisterPlan(name, adminPlan, tok.Ref()); err != nil {
					t.Error(err)
				}
				if i%16 == 1 {
					b.Prune()
				}
			}
		})
	}
	wg.Wait()
	b.Prune()
	if got := len(b.Plans()); got != workers*each/2 {
		t.Errorf("exactly the live plans remain: len(b.Plans()) = %d, want %d", got, workers*each/2)
	}
}
