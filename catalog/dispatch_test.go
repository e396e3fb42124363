package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, err)
		cancelA()
		<-a.Done()
		if round%2 == 0 {
			require.Equal(t, 1, c.ToolEntries(), "round %d: A's dead entry is still registered", round)
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
				require.Nil(t, winner, "round %d: two winners", round)
				winner, winRole = results[i], role
			} else {
				require.ErrorIs(t, errs[i], catalog.ErrDuplicate, "round %d", round)
				loseRole = role
			}
		}
		require.NotNil(t, winner, "round %d: no winner", round)
		wins[winRole]++

		text, err := callText(t, c, name, "tok-"+winRole)
		require.NoError(t, err, "round %d", round)
		require.Equal(t, winRole, text)
		_, err = callText(t, c, name, "tok-"+loseRole)
		require.ErrorIs(t, err, bindsec.ErrForbidden, "round %d: the loser's plan must not be in force", round)
		_, err = callText(t, c, name, "")
		require.ErrorIs(t, err, bindsec.ErrUnauthenticated, "round %d: never pass-through", round)
		require.NoError(t, a.Stop(bg), "A's late stop")
		_, err = callText(t, c, name, "")
		require.ErrorIs(t, err, bindsec.ErrUnauthenticated, "round %d: A's late stop opened the route", round)
		require.NoError(t, winner.Stop(bg))
	}
	assert.Zero(t, breaches.Load(), "route bodies ran without their owner's checks")
	assert.Equal(t, rounds, wins["b"]+wins["c"])
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

	assert.Zero(t, breaches.Load(), "a route body ran for a request without valid credentials")
	assert.GreaterOrEqual(t, bodies.Load(), cycles, "every cycle's authenticated call reaches its body")
	assert.Positive(t, made.Load())
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
	require.NoError(t, err)

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
	require.Eventually(t, func() bool { return k.Waiting() == inFlight-workers }, 10*time.Second, time.Millisecond)

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
		assert.True(t, errors.Is(err, catalog.ErrRouteGone) || errors.Is(err, catalog.ErrNotFound),
			"a call after the death got %v", err)
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
	assert.Equal(t, inFlight, completed+gone)
	assert.Equal(t, workers, completed, "the bodies already running complete")
	assert.Equal(t, int64(workers), bodies.Load(), "no waiting body runs after the death")
	assert.Zero(t, late.Load(), "bodies ran for calls that began after the death was observed")
	require.NoError(t, k.Stop(bg))
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
	require.NoError(t, err)
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { open(); _ = k.Stop(bg) })
	first := make(chan error, 1)
	go func() { _, err := c.CallTool(bg, "busy", json.RawMessage(`{"n":1}`), ""); first <- err }()
	<-started // the one slot is taken

	queuedCtx, cancelQueued := context.WithCancel(bg)
	queued := make(chan error, 1)
	go func() { _, err := c.CallTool(queuedCtx, "busy", json.RawMessage(`{"n":2}`), ""); queued <- err }()
	require.Eventually(t, func() bool { return k.Waiting() == 1 }, 10*time.Second, time.Millisecond)

	// Bounded: a room that lets this call wait would otherwise hang the
	// test until the body it waits behind ends, which is never.
	third, cancelThird := context.WithTimeout(bg, guard)
	defer cancelThird()
	_, err = c.CallTool(third, "busy", json.RawMessage(`{"n":3}`), "")
	assert.ErrorIs(t, err, catalog.ErrOverloaded, "the waiting room of one is full")

	cancelQueued()
	assert.ErrorIs(t, recvErr(t, queued, "the queued call"), context.Canceled)
	open()
	require.NoError(t, recvErr(t, first, "the first call"))
	res, err := c.CallTool(bg, "busy", json.RawMessage(`{"n":4}`), "")
	require.NoError(t, err)
	assert.Equal(t, `{"n":4}`, res.Content[0].Text)
	assert.Equal(t, int32(2), runs.Load(), "the abandoned call's body never ran")
}

func TestStopDrainsInFlightCalls(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	gate, started := make(chan struct{}), make(chan struct{})
	k, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		close(started)
		<-gate
		return catalog.TextResult("finished"), nil
	})
	require.NoError(t, err)
	result := make(chan string, 1)
	go func() { text, _ := callText(t, c, "t", ""); result <- text }()
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- k.Stop(bg) }()
	require.Eventually(t, func() bool { return len(c.Tools().List()) == 0 }, 10*time.Second, time.Millisecond, "Stop unlists first")
	select {
	case err := <-stopped:
		t.Errorf("Stop returned (%v) before the in-flight call finished", err)
		stopped <- err
	default:
	}
	close(gate)
	assert.Equal(t, "finished", <-result, "the in-flight call completes")
	assert.NoError(t, <-stopped)
}

func TestStopIsBoundedByContext(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	gate, started := make(chan struct{}), make(chan struct{})
	k, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		close(started)
		<-gate
		return catalog.Result{}, nil
	})
	require.NoError(t, err)
	go func() { _, _ = c.CallTool(bg, "t", nil, "") }()
	<-started
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, k.Stop(ctx), context.DeadlineExceeded)
	assert.Empty(t, c.Tools().List())
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
		assert.ErrorIs(t, err, tt.want, "credential %q", tt.credential)
		assert.True(t, catalog.Denied(err))
		if tt.credential != "" {
			assert.NotContains(t, err.Error(), tt.credential, "a denial must not echo the credential")
		}
	}
	assert.Zero(t, runs.Load())
	text, err := callText(t, c, "guarded", "tok-a")
	require.NoError(t, err)
	assert.Equal(t, "a", text, "the body sees the admitted principal")

	noAuth := newCatalog(t, catalog.Config{})
	startTool(t, noAuth, bg, "guarded", bindsec.Plan{}, reply("x"))
	_, err = callText(t, noAuth, "guarded", "tok-a")
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "without an authenticator only public routes answer")
}
