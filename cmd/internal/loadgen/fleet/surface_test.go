package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
)

// Invariant 11 judges each Updated call and each update heard: a call
// begun after its consumer was observed dead that returned nil, and an
// update whose only earlier publishes were such calls, are violations;
// an update with no publish before it (a move's or a reopen's) is
// inconclusive; the rest are not.
func TestJudgeUpdates(t *testing.T) {
	up := &replica{id: 1, name: "a"}
	live := rec(up, "fl-1", "flres://r0", 7, false)
	dead := rec(up, "fl-2", "flres://r0", 7, true)
	dead.death.Store(10)
	dying := rec(up, "fl-3", "flres://r0", 7, true)
	dying.death.Store(30)
	type pub struct {
		rec   *record
		begin uint64
		err   error
	}
	for _, tc := range []struct {
		name         string
		pubs         []pub
		heard        uint64 // 0: none
		violations   int64
		inconclusive int64
	}{
		{"a live publish, heard after it", []pub{{live, 5, nil}}, 6, 0, 0},
		{"a dead consumer's publish refused", []pub{{dead, 11, catalog.ErrDeadOwner}}, 0, 0, 0},
		{"a dead consumer's publish succeeded", []pub{{dead, 11, nil}}, 0, 1, 0},
		{"a publish begun before the death was seen, refused", []pub{{dying, 20, catalog.ErrDeadOwner}}, 0, 0, 0},
		{"heard with no publish before it", []pub{{live, 8, nil}}, 6, 0, 1},
		{"heard with nothing published at all", nil, 6, 0, 1},
		{"heard after only a dead consumer's successful publish", []pub{{dead, 11, nil}}, 12, 2, 0},
		{"heard after a live publish and a dead one's", []pub{{live, 5, nil}, {dead, 11, nil}}, 12, 1, 0},
		{"heard after a live publish that the death then refused", []pub{{dying, 20, catalog.ErrDeadOwner}}, 21, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			b := newSubsBook(tl, func() uint64 { return 0 })
			for _, p := range tc.pubs {
				if !p.rec.diedBefore(p.begin) {
					b.note(p.rec.name, p.begin, false)
				}
				b.judgePublish(p.rec, p.begin, p.err)
			}
			if tc.heard != 0 {
				b.heardUpdate("flres://r0", tc.heard, "b")
			}
			if v := tl.Violations(InvUpdateAfterDeath); v != tc.violations {
				t.Errorf("%d violations, want %d", v, tc.violations)
			}
			if n := tl.inconclusive[InvUpdateAfterDeath].Load(); n != tc.inconclusive {
				t.Errorf("%d inconclusive, want %d", n, tc.inconclusive)
			}
		})
	}
}

// The real publish path: a live consumer's Updated reaches the listener,
// and once its death is observed its late publish is refused, and
// judged.
func TestPublishRealConsumer(t *testing.T) {
	cat, err := catalog.New(catalog.Config{Authenticator: authenticator(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	heard := 0
	cat.OnResourceUpdated(func(string) { heard++ })
	k, err := cat.StartResource(context.Background(), catalog.Resource{URI: "flres://r0", Name: "fl-1"}, authPlan(),
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	r := rec(&replica{id: 1, name: "a"}, "fl-1", "flres://r0", 7, false)
	r.done = k.Done()
	tl := &tally{}
	var clock uint64
	b := newSubsBook(tl, func() uint64 { clock++; return clock })
	b.publish(r, k)
	if err := k.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.death.Store(b.tick())
	b.latePublish(r, k)
	if heard != 1 || b.published.Load() != 1 || b.lateRefused.Load() != 1 {
		t.Errorf("heard %d, published %d, late refused %d; want 1, 1, 1", heard, b.published.Load(), b.lateRefused.Load())
	}
	if v, c := tl.Violations(InvUpdateAfterDeath), tl.Checks(InvUpdateAfterDeath); v != 0 || c != 1 {
		t.Errorf("%d violations in %d checks, want 0 in 1", v, c)
	}
}

// Invariant 12 judges what a progress caller heard: the reports in
// order, each once, all of them; a body without a Client to report to
// is a violation too; a report that failed makes the count inconclusive.
func TestJudgeHeardProgress(t *testing.T) {
	a, b := &replica{id: 1, name: "a"}, &replica{id: 2, name: "b"}
	holder := rec(a, "fl-1", "tool-0", 7, false)
	full := &progressBody{rec: holder, client: true, sent: 3}
	for _, tc := range []struct {
		name         string
		pb           *progressBody
		heard        []float64
		violations   int64
		inconclusive int64
	}{
		{"all three in order", full, []float64{1, 2, 3}, 0, 0},
		{"out of order", full, []float64{2, 1, 3}, 1, 0},
		{"one lost", full, []float64{1, 3}, 1, 0},
		{"none arrived", full, nil, 1, 0},
		{"one told twice", full, []float64{1, 2, 2, 3}, 1, 0},
		{"one more than reported", full, []float64{1, 2, 3, 4}, 1, 0},
		{"the body had no Client", &progressBody{rec: holder, sent: 0}, nil, 1, 0},
		{"a report failed, the rest in order", &progressBody{rec: holder, client: true, sent: 2}, []float64{1, 3}, 0, 1},
		{"a report failed, the rest out of order", &progressBody{rec: holder, client: true, sent: 2}, []float64{3, 1}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			judgeHeard(tl, tc.pb, b, true, tc.heard)
			if v := tl.Violations(InvNotificationOrder); v != tc.violations {
				t.Errorf("%d violations, want %d", v, tc.violations)
			}
			if n := tl.inconclusive[InvNotificationOrder].Load(); n != tc.inconclusive {
				t.Errorf("%d inconclusive, want %d", n, tc.inconclusive)
			}
		})
	}
}

// awaitHeard returns what the handler heard for a token, waiting for the
// count, and gives up after its patience.
func TestAwaitHeard(t *testing.T) {
	b := newProgressBook()
	tok := progressToken(1)
	go func() {
		for i := 1; i <= 3; i++ {
			time.Sleep(time.Millisecond)
			b.hear(context.Background(), progressRequest(tok, float64(i)))
		}
	}()
	if got := b.awaitHeard(tok, 3, 2*time.Second); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("heard %v, want [1 2 3]", got)
	}
	t0 := time.Now()
	if got := b.awaitHeard(progressToken(2), 1, 20*time.Millisecond); got != nil || time.Since(t0) < 20*time.Millisecond {
		t.Errorf("heard %v after %v, want nothing after 20ms", got, time.Since(t0))
	}
}

// Invariant 4 covers prompts and templates: a replica whose prompt or
// template listing differs from the others' past the bound is a
// violation, as one whose tools differ is.
func TestConvergeSurfaceListings(t *testing.T) {
	now := time.Unix(0, 0)
	clk := clock{now: func() time.Time { return now }, sleep: func(d time.Duration) { now = now.Add(d) }}
	tools := []string{"tool-0=fl-1"}
	for _, tc := range []struct {
		name       string
		other      []string // the second replica's surface listing, until it catches up
		lag        time.Duration
		violations int64
	}{
		{"the same at once", []string{"prompt:flprompt-0=fl-2"}, 0, 0},
		{"a prompt differs within the bound", []string{}, 50 * time.Millisecond, 0},
		{"a prompt differs past the bound", []string{}, 150 * time.Millisecond, 1},
		{"a template's holder differs past the bound", []string{"prompt:flprompt-0=fl-2", "template:" + templateURI(0) + "=fl-9"}, 150 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			c := convergeChecker{t: tl, bound: 100 * time.Millisecond, clock: clk}
			t0 := now
			want := append(append([]string(nil), tools...), "prompt:flprompt-0=fl-2")
			listings := func() [][]string {
				other := append(append([]string(nil), tools...), tc.other...)
				if now.Sub(t0) >= tc.lag {
					other = want
				}
				return [][]string{want, other}
			}
			c.converge(context.Background(), listings, time.Second)
			if v := tl.Violations(InvListingConvergence); v != tc.violations {
				t.Errorf("%d violations, want %d", v, tc.violations)
			}
		})
	}
}

func authPlan() bindsec.Plan { return bearer.Plan(true) }

func progressRequest(tok string, v float64) *mcp.ProgressNotificationClientRequest {
	return &mcp.ProgressNotificationClientRequest{Params: &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: v}}
}
