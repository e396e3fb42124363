package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// tokens: one bearer token per role, so a test can present any role.
var tokens = bindsec.NewStaticTokens(map[string]bindsec.Principal{
	"tok-a": bindsec.NewPrincipal("a", "a"),
	"tok-b": bindsec.NewPrincipal("b", "b"),
	"tok-c": bindsec.NewPrincipal("c", "c"),
	"tok-r": bindsec.NewPrincipal("r", "r"),
})

// roleBody answers with its role, and counts a run without that role as a
// breach: the body ran without the checks its owner registered.
func roleBody(role string, breaches *atomic.Int64) catalog.ToolHandler {
	return func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		if !c.Principal.HasRole(role) {
			breaches.Add(1)
		}
		return catalog.TextResult(role), nil
	}
}

// Dead A; B and C restart the route at once. Exactly one wins, dispatch then
// enforces the winner's plan, and no request ever falls through to the body
// unchecked, not even while the plans change hands. PassThrough mode makes
// a fallback to "no plan" visible as a breach.
func TestConcurrentRestartEnforcesWinnersPlan(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	c := newCatalog(t, catalog.Config{MissingPlan: bindsec.PassThrough, Authenticator: tokens})
	// In even rounds A's reclaim waits until B and C have both returned, so
	// that they race over A's dead entry and plan, as in the ADR; in odd
	// rounds the catalog may reclaim them first.
	var held sync.Map // route name → channel that releases A's reclaim
	c.SetBeforeRetireHook(func(name string) {
		if ch, ok := held.Load(name); ok {
			<-ch.(chan struct{})
		}
	})
	var breaches atomic.Int64
	wins := map[string]int{}
	for round := range rounds {
		name := "route-" + strconv.Itoa(round)
		release := make(chan struct{})
		if round%2 == 0 {
			held.Store(name, release)
		}
		ctxA, cancelA := context.WithCancel(bg)
		a, err := c.StartTool(ctxA, catalog.Tool{Name: name}, bindsec.Plan{Roles: []string{"a"}}, roleBody("a", &breaches))
		if err != nil {
			t.Fatal(err)
		}
		cancelA()
		<-a.Done()
		if round%2 == 0 {
			if got := c.ToolEntries(); got != 1 {
				t.Fatalf("round %d: A's dead entry is still registered: c.ToolEntries() = %v, want 1", round, got)
			}
		}

		barrier := make(chan struct{})
		var starters, prober sync.WaitGroup
		results := make([]*catalog.Consumer, 2)
		errs := make([]error, 2)
		for i, role := range []string{"b", "c"} {
			starters.Go(func() {
				<-barrier
				results[i], errs[i] = c.StartTool(bg, catalog.Tool{Name: name}, bindsec.Plan{Roles: []string{role}}, roleBody(role, &breaches))
			})
		}
		// An unauthenticated caller races the restart until both starts
		// have returned.
		probing := make(chan struct{})
		prober.Go(func() {
			<-barrier
			for {
				select {
				case <-probing:
					return
				default:
				}
				if _, err := c.CallTool(bg, name, nil, ""); err == nil {
					breaches.Add(1)
				}
				runtime.Gosched()
			}
		})
		close(barrier)
		starters.Wait()
		close(probing)
		prober.Wait()
		close(release)

		var winner *catalog.Consumer
		winRole, loseRole := "", ""
		for i, role := range []string{"b", "c"} {
			if errs[i] == nil {
				if winner != nil {
					t.Fatalf("round %d: two winners: winner = %v, want nil", round, winner)
				}
				winner, winRole = results[i], role
			} else {
				if !errors.Is(errs[i], catalog.ErrDuplicate) {
					t.Fatalf("round %d: err = %v, want catalog.ErrDuplicate", round, errs[i])
				}
				loseRole = role
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no winner: winner is nil", round)
		}
		wins[winRole]++

		text, err := callText(t, c, name, "tok-"+winRole)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if text != winRole {
			t.Fatalf("text = %q, want %q", text, winRole)
		}
		_, err = callText(t, c, name, "tok-"+loseRole)
		if !errors.Is(err, bindsec.ErrForbidden) {
			t.Fatalf("round %d: the loser's plan must not be in force: err = %v, want bindsec.ErrForbidden", round, err)
		}
		_, err = callText(t, c, name, "")
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Fatalf("round %d: never pass-through: err = %v, want bindsec.ErrUnauthenticated", round, err)
		}
		if err := a.Stop(bg); err != nil {
			t.Fatalf("A's late stop: %v", err)
		}
		_, err = callText(t, c, name, "")
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Fatalf("round %d: A's late stop opened the route: err = %v, want bindsec.ErrUnauthenticated", round, err)
		}
		if err := winner.Stop(bg); err != nil {
			t.Fatal(err)
		}
	}
	if got := breaches.Load(); got != 0 {
		t.Errorf("route bodies ran without their owner's checks: breaches.Load() = %v, want 0", got)
	}
	if got := wins["b"] + wins["c"]; got != rounds {
		t.Errorf("wins[\"b\"]+wins[\"c\"] = %v, want %v", got, rounds)
	}
	t.Logf("winners over %d rounds: %v", rounds, wins)
}

// PassThrough, adversarial: owners with role-guarded plans die, restart
// and stop late on a few routes while many goroutines call without
// credentials. ADR-0068 promises that plan removal cannot open an auth
// hole; here that means no route body ever runs for those calls.
//
// The callers call for as long as the churn has not completed its cycles,
// so that every run exercises the churn it claims to, however the
// goroutines are scheduled.
func TestPassThroughNeverRunsUnauthenticatedBodies(t *testing.T) {
	const routes, callers = 4, 6
	cycles := int64(2000)
	if testing.Short() {
		cycles = 400
	}
	c := newCatalog(t, catalog.Config{MissingPlan: bindsec.PassThrough, Authenticator: tokens})
	var bodies, breaches, made, churned atomic.Int64
	body := func(_ context.Context, call catalog.Call) (catalog.Result, error) {
		bodies.Add(1)
		if !call.Principal.HasRole("r") {
			breaches.Add(1)
		}
		return catalog.TextResult("ok"), nil
	}
	plan := bindsec.Plan{Roles: []string{"r"}}

	done := make(chan struct{})
	var churn sync.WaitGroup
	for r := range routes {
		churn.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			name := fmt.Sprintf("route-%d", r)
			var dead []*catalog.Consumer
			for {
				select {
				case <-done:
					for _, k := range dead {
						_ = k.Stop(bg)
					}
					return
				default:
				}
				ctx, cancel := context.WithCancel(bg)
				k, err := c.StartTool(ctx, catalog.Tool{Name: name}, plan, body)
				if err != nil {
					cancel()
					continue
				}
				// Valid calls keep the bodies busy.
				_, _ = c.CallTool(bg, name, nil, "tok-r")
				switch rng.IntN(3) {
				case 0:
					_ = k.Stop(bg)
					cancel()
				case 1:
					cancel() // aborted; its stop comes late, after a restart
					<-k.Done()
					dead = append(dead, k)
				default:
					cancel()
					<-k.Done()
					_ = k.Stop(bg)
				}
				if len(dead) > 3 {
					_ = dead[0].Stop(bg)
					dead = dead[1:]
				}
				churned.Add(1)
			}
		})
	}
	var callersWG sync.WaitGroup
	for i := range callers {
		callersWG.Go(func() {
			for n := i; churned.Load() < cycles; n++ {
				made.Add(1)
				_, _ = c.CallTool(bg, fmt.Sprintf("route-%d", n%routes), nil, "")
			}
		})
	}
	callersWG.Wait()
	close(done)
	churn.Wait()

	if got := breaches.Load(); got != 0 {
		t.Errorf("a route body ran for a request without valid credentials: breaches.Load() = %v, want 0", got)
	}
	if got := bodies.Load(); got < cycles {
		t.Errorf("every cycle's authenticated call reaches its body: bodies.Load() = %v, want >= %v", got, cycles)
	}
	if got := made.Load(); got <= 0 {
		t.Errorf("made.Load() = %v, want > 0", got)
	}
	t.Logf("%d unauthenticated calls over %d start/death cycles", made.Load(), churned.Load())
}

// A thousand calls are in flight when their owner dies: four running, the
// rest waiting for a slot. Each one either completed by the live owner or
// failed cleanly with ErrRouteGone, no waiting call's body ran after the
// death, and no body started for a call that began after the death was
// observed.
func TestInFlightCallsWhenOwnerDies(t *testing.T) {
	const inFlight, workers = 1000, 4
	c := newCatalog(t, catalog.Config{})
	gate := make(chan struct{})
	var clock atomic.Int64  // orders call starts and the observed death
	var diedAt atomic.Int64 // clock value when the death was observed
	var bodies, late atomic.Int64
	handler := func(_ context.Context, call catalog.Call) (catalog.Result, error) {
		var args struct{ N int64 }
		_ = json.Unmarshal(call.Arguments, &args)
		began := args.N
		if d := diedAt.Load(); d != 0 && d < began {
			late.Add(1)
		}
		bodies.Add(1)
		<-gate
		return catalog.TextResult("done"), nil
	}
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartTool(ctx, catalog.Tool{Name: "slow"}, public, handler,
		catalog.WithMaxConcurrent(workers), catalog.WithWaitingRoom(inFlight))
	if err != nil {
		t.Fatal(err)
	}

	// launch starts n calls, each stamped with the clock at its start, and
	// returns where their errors arrive.
	launch := func(n int) <-chan error {
		errs := make(chan error, n)
		for range n {
			go func() {
				began := clock.Add(1)
				_, err := c.CallTool(bg, "slow", json.RawMessage(`{"n":`+strconv.FormatInt(began, 10)+`}`), "")
				errs <- err
			}()
		}
		return errs
	}
	errs := launch(inFlight)
	eventually(t, 10*time.Second, func() bool { return k.Waiting() == inFlight-workers }, "every call past the slots waits")

	cancel()
	<-k.Done()
	diedAt.Store(clock.Add(1))
	// Calls that begin after the death was observed: not one body may run
	// for them, whether they resolve the route before it is reclaimed
	// (ErrRouteGone) or after (ErrNotFound).
	const after = 100
	lateErrs := launch(after)
	for range after {
		err := <-lateErrs
		if !(errors.Is(err, catalog.ErrRouteGone) || errors.Is(err, catalog.ErrNotFound)) {
			t.Errorf("a call after the death got %v: errors.Is(err, catalog.ErrRouteGone) || errors.Is(err, catalog.ErrNotFound) is false", err)
		}
	}
	close(gate)

	completed, gone := 0, 0
	for range inFlight {
		switch err := <-errs; {
		case err == nil:
			completed++
		case errors.Is(err, catalog.ErrRouteGone):
			gone++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if got := completed + gone; got != inFlight {
		t.Errorf("completed+gone = %v, want inFlight", got)
	}
	if completed != workers {
		t.Errorf("the bodies already running complete: completed = %v, want workers", completed)
	}
	if got := bodies.Load(); got != int64(workers) {
		t.Errorf("no waiting body runs after the death: bodies.Load() = %v, want int64(workers)", got)
	}
	if got := late.Load(); got != 0 {
		t.Errorf("bodies ran for calls that began after the death was observed: late.Load() = %v, want 0", got)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
}

// One slot, a waiting room of one: a third call is refused at once, and a
// waiting call whose ctx ends leaves without running its body.
func TestOverloadedAndWaitingCancel(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	gate, started := make(chan struct{}), make(chan struct{}, 8)
	var runs atomic.Int32
	k, err := c.StartTool(bg, catalog.Tool{Name: "busy"}, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		started <- struct{}{}
		<-gate
		return catalog.TextResult(string(call.Arguments)), nil
	}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(1))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { open(); _ = k.Stop(bg) })
	first := make(chan error, 1)
	go func() { _, err := c.CallTool(bg, "busy", json.RawMessage(`{"n":1}`), ""); first <- err }()
	<-started // the one slot is taken

	queuedCtx, cancelQueued := context.WithCancel(bg)
	queued := make(chan error, 1)
	go func() { _, err := c.CallTool(queuedCtx, "busy", json.RawMessage(`{"n":2}`), ""); queued <- err }()
	eventually(t, 10*time.Second, func() bool { return k.Waiting() == 1 }, "the queued call waits")

	// Bounded: a room that lets this call wait would otherwise hang the
	// test until the body it waits behind ends, which is never.
	third, cancelThird := context.WithTimeout(bg, guard)
	defer cancelThird()
	_, err = c.CallTool(third, "busy", json.RawMessage(`{"n":3}`), "")
	if !errors.Is(err, catalog.ErrOverloaded) {
		t.Errorf("the waiting room of one is full: err = %v, want catalog.ErrOverloaded", err)
	}

	cancelQueued()
	if err := recvErr(t, queued, "the queued call"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	open()
	if err := recvErr(t, first, "the first call"); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(bg, "busy", json.RawMessage(`{"n":4}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != `{"n":4}` {
		t.Errorf("res.Content[0].Text = %q, want `{\"n\":4}`", res.Content[0].Text)
	}
	if got := runs.Load(); got != int32(2) {
		t.Errorf("the abandoned call's body never ran: runs.Load() = %v, want int32(2)", got)
	}
}

func TestStopDrainsInFlightCalls(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	gate, started := make(chan struct{}), make(chan struct{})
	k, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		close(started)
		<-gate
		return catalog.TextResult("finished"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan string, 1)
	go func() { text, _ := callText(t, c, "t", ""); result <- text }()
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- k.Stop(bg) }()
	eventually(t, 10*time.Second, func() bool { return len(c.Tools().List()) == 0 }, "Stop unlists first")
	select {
	case err := <-stopped:
		t.Errorf("Stop returned (%v) before the in-flight call finished", err)
		stopped <- err
	default:
	}
	close(gate)
	if got := <-result; got != "finished" {
		t.Errorf("the in-flight call completes: <-result = %q, want \"finished\"", got)
	}
	if err := <-stopped; err != nil {
		t.Error(err)
	}
}

func TestStopIsBoundedByContext(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	gate, started := make(chan struct{}), make(chan struct{})
	k, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		close(started)
		<-gate
		return catalog.Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = c.CallTool(bg, "t", nil, "") }()
	<-started
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if err := k.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if len(c.Tools().List()) != 0 {
		t.Errorf("c.Tools().List() = %v, want empty", c.Tools().List())
	}
	select {
	case <-k.Done():
	default:
		t.Error("a stopped consumer is dead even when its drain was cut short")
	}
	close(gate)
}

func TestDenials(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: tokens})
	var runs atomic.Int32
	startTool(t, c, bg, "guarded", bindsec.Plan{Roles: []string{"a"}}, func(_ context.Context, call catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.TextResult(call.Principal.Subject()), nil
	})
	tests := []struct {
		credential string
		want       error
	}{
		{"", bindsec.ErrUnauthenticated},
		{"not-a-token", bindsec.ErrUnauthenticated},
		{"tok-b", bindsec.ErrForbidden},
	}
	for _, tt := range tests {
		_, err := callText(t, c, "guarded", tt.credential)
		if !errors.Is(err, tt.want) {
			t.Errorf("credential %q: err = %v, want %v", tt.credential, err, tt.want)
		}
		if !catalog.Denied(err) {
			t.Errorf("catalog.Denied(err) is false")
		}
		if tt.credential != "" {
			if got := err.Error(); strings.Contains(got, tt.credential) {
				t.Errorf("a denial must not echo the credential: err.Error() = %q, want it not to contain %q", got, tt.credential)
			}
		}
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("runs.Load() = %v, want 0", got)
	}
	text, err := callText(t, c, "guarded", "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	if text != "a" {
		t.Errorf("the body sees the admitted principal: text = %q, want \"a\"", text)
	}

	noAuth := newCatalog(t, catalog.Config{})
	startTool(t, noAuth, bg, "guarded", bindsec.Plan{}, reply("x"))
	_, err = callText(t, noAuth, "guarded", "tok-a")
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("without an authenticator only public routes answer: err = %v, want bindsec.ErrUnauthenticated", err)
	}
}
