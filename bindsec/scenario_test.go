package bindsec_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// ---- the six scenarios of the plan book ----------------------------------

// Scenario 1: a failed duplicate start keeps the incumbent's plan. B's plan
// is public, so a B that got its plan in would open the route to anybody.
func TestScenario1FailedDuplicateStartKeepsIncumbentPlan(t *testing.T) {
	eachMode(t, func(t *testing.T, b *bindsec.Book) {
		cat := newCatalog(t)
		a := live(t)
		if err := b.RegisterPlan("tool", adminPlan, a.Ref()); err != nil {
			t.Fatal(err)
		}
		if err := cat.RegisterReady("tool", "a", a.Ref()); err != nil {
			t.Fatal(err)
		}

		bTok := owner.New()
		if err := b.RegisterPlan("tool", bindsec.Plan{Public: true}, bTok.Ref()); !errors.Is(err, bindsec.ErrPlanHeld) {
			t.Fatalf("err = %v, want bindsec.ErrPlanHeld", err)
		}
		if err := cat.Register("tool", "b", bTok.Ref()); !errors.Is(err, shardreg.ErrDuplicate) {
			t.Fatalf("err = %v, want shardreg.ErrDuplicate", err)
		}
		// B's owner-conditional failure cleanup.
		if b.UnregisterPlanOwned("tool", bTok.Ref()) {
			t.Errorf("B's cleanup must not remove A's plan: b.UnregisterPlanOwned(\"tool\", bTok.Ref()) is true")
		}
		if cat.UnregisterOwned("tool", bTok.Ref()) {
			t.Errorf("cat.UnregisterOwned(\"tool\", bTok.Ref()) is true")
		}
		bTok.Release()

		p, o, ok := b.Lookup("tool")
		if !ok {
			t.Fatalf("A's plan is gone: ok is false")
		}
		if !o.Same(a.Ref()) {
			t.Errorf("o.Same(a.Ref()) is false")
		}
		if !reflect.DeepEqual(p, adminPlan) {
			t.Errorf("p = %v, want %v", p, adminPlan)
		}

		_, err := b.Guard(ctx, "tool", "", tokens)
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Errorf("A's plan is still enforced: err = %v, want bindsec.ErrUnauthenticated", err)
		}
		_, err = b.Guard(ctx, "tool", tokReader, tokens)
		if !errors.Is(err, bindsec.ErrForbidden) {
			t.Errorf("err = %v, want bindsec.ErrForbidden", err)
		}
		pr, err := b.GuardOwned(ctx, "tool", a.Ref(), tokAdmin, tokens)
		if err != nil {
			t.Fatal(err)
		}
		if got := pr.Subject(); got != "ada" {
			t.Errorf("pr.Subject() = %q, want \"ada\"", got)
		}
	})
}

// Scenario 2: a late stop of a dead owner keeps the replacement's plan.
func TestScenario2LateStopKeepsReplacementPlan(t *testing.T) {
	eachMode(t, func(t *testing.T, b *bindsec.Book) {
		cat := newCatalog(t)
		a := owner.New()
		if err := b.RegisterPlan("tool", bindsec.Plan{Roles: []string{"reader"}}, a.Ref()); err != nil {
			t.Fatal(err)
		}
		if err := cat.RegisterReady("tool", "a", a.Ref()); err != nil {
			t.Fatal(err)
		}
		a.Release() // died without a stop

		bTok := live(t)
		if err := b.RegisterPlan("tool", adminPlan, bTok.Ref()); err != nil {
			t.Fatalf("a dead owner's plan must not block a restart: %v", err)
		}
		if err := cat.RegisterReady("tool", "b", bTok.Ref()); err != nil {
			t.Fatal(err)
		}

		// A's stop arrives late.
		if b.UnregisterPlanOwned("tool", a.Ref()) {
			t.Errorf("a late stop removed the replacement's plan: b.UnregisterPlanOwned(\"tool\", a.Ref()) is true")
		}
		if cat.UnregisterOwned("tool", a.Ref()) {
			t.Errorf("cat.UnregisterOwned(\"tool\", a.Ref()) is true")
		}

		e, ok := cat.Resolve("tool")
		if !ok {
			t.Fatalf("cat.Resolve(\"tool\") found nothing")
		}
		p, o, ok := b.Lookup("tool")
		if !ok {
			t.Fatalf("B's plan is gone: ok is false")
		}
		if !o.Same(e.Owner) {
			t.Errorf("the route entry and its plan have one owner: o.Same(e.Owner) is false")
		}
		if !reflect.DeepEqual(p, adminPlan) {
			t.Errorf("p = %v, want %v", p, adminPlan)
		}

		_, err := b.GuardOwned(ctx, "tool", e.Owner, "", tokens)
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
		}
		_, err = b.GuardOwned(ctx, "tool", e.Owner, tokReader, tokens)
		if !errors.Is(err, bindsec.ErrForbidden) {
			t.Errorf("A's looser plan must not apply any more: err = %v, want bindsec.ErrForbidden", err)
		}
		_, err = b.GuardOwned(ctx, "tool", e.Owner, tokAdmin, tokens)
		if err != nil {
			t.Error(err)
		}
		_, err = b.Guard(ctx, "tool", "", tokens)
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
		}
	})
}

// Scenario 4: PlanFor and Plans ignore a dead owner's plan, whichever way
// the owner died, and PlanFor reclaims it.
func TestScenario4DeadOwnersPlanIgnored(t *testing.T) {
	for _, death := range []struct {
		name string
		// mint returns a live owner's Ref and a function that kills it.
		mint func(t *testing.T) (owner.Ref, func())
	}{
		{"release", func(*testing.T) (owner.Ref, func()) {
			tok := owner.New()
			return tok.Ref(), tok.Release
		}},
		{"context cancel", func(*testing.T) (owner.Ref, func()) {
			c, cancel := context.WithCancel(ctx)
			tok := owner.NewContext(c)
			r := tok.Ref()
			return r, func() { cancel(); <-r.Done(); runtime.KeepAlive(tok) }
		}},
		{"Run returns", func(t *testing.T) (owner.Ref, func()) {
			refs, finish := make(chan owner.Ref), make(chan struct{})
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				_ = owner.Run(ctx, func(_ context.Context, tok *owner.Token) error {
					refs <- tok.Ref()
					<-finish
					return errors.New("consumer failed")
				})
			}()
			return <-refs, func() { close(finish); <-returned }
		}},
		{"dropped", func(t *testing.T) (owner.Ref, func()) {
			// The holder keeps the token reachable until kill drops it,
			// so that it cannot die before its plan is registered.
			holder := &struct{ tok *owner.Token }{owner.New()}
			r := holder.tok.Ref()
			return r, func() { holder.tok = nil; awaitDeath(t, r) }
		}},
	} {
		t.Run(death.name, func(t *testing.T) {
			b := bindsec.NewBook()
			keep := live(t)
			if err := b.RegisterPlan("alive", adminPlan, keep.Ref()); err != nil {
				t.Fatal(err)
			}
			ref, kill := death.mint(t)
			if err := b.RegisterPlan("doomed", bindsec.Plan{Public: true}, ref); err != nil {
				t.Fatal(err)
			}
			if got := len(b.Plans()); got != 2 {
				t.Fatalf("len(b.Plans()) = %d, want %d", got, 2)
			}

			kill()
			if ref.Alive() {
				t.Fatalf("ref.Alive() is true")
			}
			if got, want := b.Plans(), ([]bindsec.RoutePlan{{Route: "alive", Plan: adminPlan}}); !reflect.DeepEqual(got, want) {
				t.Errorf("Plans lists a dead owner's plan: b.Plans() = %v, want %v", got, want)
			}
			_, ok := b.PlanFor("doomed")
			if ok {
				t.Errorf("PlanFor returned a dead owner's plan: ok is true")
			}
			_, _, ok = b.Lookup("doomed")
			if ok {
				t.Errorf("b.Lookup(\"doomed\") found an entry")
			}
			_, err := b.Guard(ctx, "doomed", "", tokens)
			if !errors.Is(err, bindsec.ErrNoPlan) {
				t.Errorf("a dead owner's public plan must not keep the route open: err = %v, want bindsec.ErrNoPlan", err)
			}
			if b.UnregisterPlanOwned("doomed", ref) {
				t.Errorf("the dead plan should have been reclaimed already: b.UnregisterPlanOwned(\"doomed\", ref) is true")
			}
		})
	}
}

// awaitDeath collects garbage until r reads dead. Cleanups run after a
// collection on their own goroutine, so one GC is not always enough.
func awaitDeath(t *testing.T, r owner.Ref) {
	t.Helper()
	for range 1000 {
		runtime.GC()
		select {
		case <-r.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("a dropped token never died")
}

// Scenario 5: what a request presents decides, on a non-public route.
func TestScenario5Credentials(t *testing.T) {
	eachMode(t, func(t *testing.T, b *bindsec.Book) {
		o := live(t)
		if err := b.RegisterPlan("tool", bindsec.Plan{Roles: []string{"admin", "ops"}}, o.Ref()); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, cred string
			want       error
		}{
			{"no credential", "", bindsec.ErrUnauthenticated},
			{"unknown token", "s3cr3t-guess", bindsec.ErrUnauthenticated},
			{"good token, every role", tokAdmin, nil},
			{"good token lacking a role", tokReader, bindsec.ErrForbidden},
			{"expired principal", tokExpired, bindsec.ErrExpired},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, guard := range []struct {
					name string
					fn   func() (bindsec.Principal, error)
				}{
					{"Guard", func() (bindsec.Principal, error) { return b.Guard(ctx, "tool", tt.cred, tokens) }},
					{"GuardOwned", func() (bindsec.Principal, error) { return b.GuardOwned(ctx, "tool", o.Ref(), tt.cred, tokens) }},
				} {
					pr, err := guard.fn()
					noCredentialLeak(t, err, tokAdmin, tokReader, tokExpired, tt.cred)
					if tt.want == nil {
						if err != nil {
							t.Fatalf("%v: %v", guard.name, err)
						}
						if want := staticTable()[tt.cred]; !reflect.DeepEqual(pr, want) {
							t.Errorf("%s returns the principal: pr = %v, want %v", guard.name, pr, want)
						}
						continue
					}
					if !errors.Is(err, tt.want) {
						t.Errorf("%v: err = %v, want %v", guard.name, err, tt.want)
					}
					if got := err.Error(); !strings.Contains(got, `"tool"`) {
						t.Errorf("a refusal names the route: err.Error() = %q, want it to contain %q", got, `"tool"`)
					}
					if pr != (bindsec.Principal{}) {
						t.Errorf("%s returns no principal with a refusal: pr = %v, want bindsec.Principal{}", guard.name, pr)
					}
				}
			})
		}
	})
}

// stressTokens: one valid principal; every other credential a stress
// request carries is invalid for every plan the churners register.
var stressTokens = bindsec.NewStaticTokens(map[string]bindsec.Principal{
	"tok-good":    bindsec.NewPrincipal("good", "admin", "ops"),
	"tok-norole":  bindsec.NewPrincipal("norole", "reader"),
	"tok-expired": bindsec.NewPrincipal("expired", "admin", "ops").WithExpires(time.Unix(1, 0)),
})

// Scenario 6: owners die, restart and stop late on a few routes while
// guards hammer them in Deny mode. Every plan is non-public, so no request
// without valid credentials may ever be granted.
func TestScenario6AdversarialStress(t *testing.T) {
	// At least 100,000 guarded calls without valid credentials, in short
	// mode too: only the churn shrinks there.
	const invalidCalls = 100_000
	const guards = 4
	routes := []string{"r0", "r1", "r2", "stable"}
	churners := 2
	if testing.Short() {
		churners = 1
	}
	b, cat := bindsec.NewBook(), newCatalog(t)
	if got := b.Mode(); got != bindsec.Deny {
		t.Fatalf("b.Mode() = %v, want bindsec.Deny", got)
	}

	// One route keeps a live owner throughout, so that valid requests are
	// granted somewhere and the test cannot pass by denying everything.
	stable := live(t)
	if err := b.RegisterPlan("stable", adminPlan, stable.Ref()); err != nil {
		t.Fatal(err)
	}
	if err := cat.RegisterReady("stable", "stable", stable.Ref()); err != nil {
		t.Fatal(err)
	}

	// Every plan needs a role tok-norole lacks; a role-free plan would
	// make tok-norole a valid credential.
	plans := []bindsec.Plan{
		{Roles: []string{"admin"}},
		{Roles: []string{"ops"}},
		{Roles: []string{"admin", "ops"}},
	}
	// consumer is one start that won its route: its token and the cancel
	// of the context the token may have been minted from.
	type consumer struct {
		tok     *owner.Token
		cancel  context.CancelFunc
		fromCtx bool
	}
	stop := make(chan struct{})
	var restarts, deaths, lateStops, lateRemoved atomic.Int64
	var mu sync.Mutex
	var survivors []consumer // still running when the churn stopped
	var churn sync.WaitGroup
	for w := range churners {
		churn.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 6))
			var corpses []owner.Ref // owners that died without a stop
			var running []consumer
			for {
				select {
				case <-stop:
					mu.Lock()
					survivors = append(survivors, running...)
					mu.Unlock()
					return
				default:
				}
				route := routes[rng.IntN(len(routes)-1)] // never "stable"
				switch rng.IntN(5) {
				case 0, 1: // start
					c := consumer{cancel: func() {}}
					if rng.IntN(2) == 0 {
						cc, cancel := context.WithCancel(ctx)
						c = consumer{tok: owner.NewContext(cc), cancel: cancel, fromCtx: true}
					} else {
						c.tok = owner.New()
					}
					p := plans[rng.IntN(len(plans))]
					if err := b.RegisterPlan(route, p, c.tok.Ref()); err != nil && !errors.Is(err, bindsec.ErrPlanHeld) {
						t.Errorf("register plan: %v", err)
					}
					if cat.Register(route, "v", c.tok.Ref()) != nil {
						b.UnregisterPlanOwned(route, c.tok.Ref())
						cat.UnregisterOwned(route, c.tok.Ref())
						c.tok.Release()
						c.cancel()
						continue
					}
					if err := b.RegisterPlanTakeover(route, p, c.tok.Ref()); err != nil {
						t.Errorf("takeover: %v", err)
					}
					cat.MarkReady(route, c.tok.Ref())
					restarts.Add(1)
					running = append(running, c)
				case 2: // die without a stop, by release or by the supervisor's cancel
					if len(running) > 0 {
						i := rng.IntN(len(running))
						c := running[i]
						if c.fromCtx && rng.IntN(2) == 0 {
							c.cancel()
							<-c.tok.Done() // the death runs on the context's goroutine
						}
						c.tok.Release()
						c.cancel()
						corpses = append(corpses, c.tok.Ref())
						running = append(running[:i], running[i+1:]...)
						deaths.Add(1)
					}
				case 3: // a late stop of some dead owner, on any route
					if len(corpses) > 0 {
						i := rng.IntN(len(corpses))
						lateStops.Add(1)
						// Removing its own dead plan is allowed; what must
						// never happen is removing a live successor's,
						// which the guards would see as ErrNoPlan at most.
						if b.UnregisterPlanOwned(route, corpses[i]) {
							lateRemoved.Add(1)
						}
						cat.UnregisterOwned(route, corpses[i])
						corpses = append(corpses[:i], corpses[i+1:]...)
					}
				case 4: // a clean stop
					if len(running) > 0 {
						i := rng.IntN(len(running))
						c := running[i]
						for _, r := range routes[:len(routes)-1] {
							b.UnregisterPlanOwned(r, c.tok.Ref())
							cat.UnregisterOwned(r, c.tok.Ref())
						}
						c.tok.Release()
						c.cancel()
						running = append(running[:i], running[i+1:]...)
					}
				}
			}
		})
	}

	// Requests cycle through these credentials; only tok-good is valid.
	creds := []string{"", "tok-unknown", "tok-norole", "tok-expired", "", "tok-good"}
	perGuard := invalidCalls/guards*len(creds)/(len(creds)-1) + 1
	var bad, invalid, validGrants, calls atomic.Int64
	var byErr [5]atomic.Int64 // unauthenticated, forbidden, expired, no plan, other
	var hammer sync.WaitGroup
	start := make(chan struct{})
	for g := range guards {
		hammer.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(g), 60))
			for i := range perGuard {
				cred := creds[i%len(creds)]
				route := routes[rng.IntN(len(routes))]
				var err error
				if (i/len(creds))%2 == 0 {
					_, err = b.Guard(ctx, route, cred, stressTokens)
				} else if e, ok := cat.Resolve(route); ok {
					_, err = b.GuardOwned(ctx, route, e.Owner, cred, stressTokens)
				} else {
					_, err = b.Guard(ctx, route, cred, stressTokens)
				}
				calls.Add(1)
				if cred != "tok-good" {
					invalid.Add(1)
					if err == nil {
						bad.Add(1)
					}
				} else if err == nil {
					validGrants.Add(1)
				}
				switch {
				case err == nil:
				case errors.Is(err, bindsec.ErrUnauthenticated):
					byErr[0].Add(1)
				case errors.Is(err, bindsec.ErrForbidden):
					byErr[1].Add(1)
				case errors.Is(err, bindsec.ErrExpired):
					byErr[2].Add(1)
				case errors.Is(err, bindsec.ErrNoPlan), errors.Is(err, bindsec.ErrPlanOwner):
					byErr[3].Add(1)
				default:
					byErr[4].Add(1)
				}
			}
		})
	}
	close(start)
	hammer.Wait()
	close(stop)
	churn.Wait()

	// In Deny mode a live plan lost to a late stop shows as ErrNoPlan, not
	// as a grant, so check it at rest: every route that resolves to a live
	// owner must still carry that owner's plan.
	for _, r := range routes {
		if e, ok := cat.Resolve(r); ok {
			_, o, ok := b.Lookup(r)
			if !(ok && o.Same(e.Owner)) {
				t.Errorf("route %s: its live owner's plan is gone: ok && o.Same(e.Owner) is false", r)
			}
		}
	}
	for _, c := range survivors {
		c.tok.Release()
		c.cancel()
	}

	t.Logf("%d guarded calls (%d without valid credentials), %d valid grants; refusals unauth/forbidden/expired/no-plan/other = %d/%d/%d/%d/%d; %d restarts, %d deaths, %d late stops (%d removed a plan)",
		calls.Load(), invalid.Load(), validGrants.Load(),
		byErr[0].Load(), byErr[1].Load(), byErr[2].Load(), byErr[3].Load(), byErr[4].Load(),
		restarts.Load(), deaths.Load(), lateStops.Load(), lateRemoved.Load())
	if got := invalid.Load(); got < int64(invalidCalls) {
		t.Fatalf("invalid.Load() = %v, want >= %v", got, int64(invalidCalls))
	}
	if got := bad.Load(); got != 0 {
		t.Errorf("requests without valid credentials were granted: bad.Load() = %v, want 0", got)
	}
	if got := byErr[4].Load(); got != 0 {
		t.Errorf("refusals with an unexpected error: byErr[4].Load() = %v, want 0", got)
	}
	if got := validGrants.Load(); got <= 0 {
		t.Errorf("valid requests to the stable route must be granted: validGrants.Load() = %v, want > 0", got)
	}
	if got := restarts.Load(); got <= 0 {
		t.Errorf("the churners never restarted a route: restarts.Load() = %v, want > 0", got)
	}
}
