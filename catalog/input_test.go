package catalog_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
)

var nameForm = catalog.ElicitRequest{Key: "user_name", Message: "What is your name?", Schema: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`)}

// greeter is a tool body that asks for a name, then a color, and greets:
// a two-round body, counting its runs.
func greeter(runs *atomic.Int64) catalog.ToolHandler {
	return func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		name, err := c.Elicit(ctx, nameForm)
		if err != nil {
			return catalog.Result{}, err
		}
		color, err := c.Elicit(ctx, catalog.ElicitRequest{Key: "color", Message: "Favourite color?"})
		if err != nil {
			return catalog.Result{}, err
		}
		return catalog.TextResult(name.Content["name"].(string) + " likes " + color.Content["color"].(string)), nil
	}
}

func accepted(k string, v any) catalog.InputResponse {
	return catalog.InputResponse{Elicit: catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{k: v}}}
}

// callRound calls the tool in a round whose caller can elicit.
func callRound(c *catalog.Catalog, name, instance string, answers map[string]catalog.InputResponse) (catalog.Result, error) {
	r := &catalog.Round{Instance: instance, Answers: answers, Elicitation: true}
	return c.CallTool(bg, name, nil, "", catalog.WithClient(&catalog.Client{Round: r}))
}

func inputRequired(t *testing.T, err error) *catalog.InputRequiredError {
	t.Helper()
	var ir *catalog.InputRequiredError
	if !errors.As(err, &ir) || !errors.Is(err, catalog.ErrInputRequired) {
		t.Fatalf("err = %v, want an *InputRequiredError", err)
	}
	return ir
}

// TestRounds: a body answered in rounds asks, the call ends with what it
// asked, and the retries with the answers so far reach the same body,
// which the last one completes.
func TestRounds(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var runs atomic.Int64
	startTool(t, c, bg, "greet", public, greeter(&runs))

	_, err := callRound(c, "greet", "", nil)
	ir := inputRequired(t, err)
	if len(ir.Requests) != 1 || ir.Requests[0].Key != "user_name" || ir.Requests[0].Elicit.Message != nameForm.Message || ir.Instance == "" {
		t.Fatalf("round 1 asked %+v", ir)
	}
	answers := map[string]catalog.InputResponse{"user_name": accepted("name", "Ada")}
	_, err = callRound(c, "greet", ir.Instance, answers)
	ir2 := inputRequired(t, err)
	if len(ir2.Requests) != 1 || ir2.Requests[0].Key != "color" || ir2.Instance != ir.Instance {
		t.Fatalf("round 2 asked %+v", ir2)
	}
	answers["color"] = accepted("color", "green")
	res, err := callRound(c, "greet", ir.Instance, answers)
	if err != nil || res.Content[0].Text != "Ada likes green" {
		t.Fatalf("round 3 = %+v, %v", res, err)
	}
	if runs.Load() != 3 {
		t.Fatalf("the body ran %d times, want 3", runs.Load())
	}
}

// TestRoundRetryNeverReachesAnotherConsumer: a retry naming the instance
// of a consumer that died, or that a successor of the same name replaced,
// is ErrRouteGone, and no body runs.
func TestRoundRetryNeverReachesAnotherConsumer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		successor bool
	}{{"died", false}, {"replaced", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			var runs atomic.Int64
			k := startTool(t, c, bg, "greet", public, greeter(&runs))
			_, err := callRound(c, "greet", "", nil)
			ir := inputRequired(t, err)
			if err := k.Stop(bg); err != nil {
				t.Fatal(err)
			}
			var later atomic.Int64
			if tc.successor {
				startTool(t, c, bg, "greet", public, greeter(&later))
			}
			_, err = callRound(c, "greet", ir.Instance, map[string]catalog.InputResponse{"user_name": accepted("name", "Ada")})
			if !errors.Is(err, catalog.ErrRouteGone) {
				t.Fatalf("retry: err = %v, want ErrRouteGone", err)
			}
			if runs.Load() != 1 || later.Load() != 0 {
				t.Fatalf("bodies ran %d and %d times, want 1 and 0", runs.Load(), later.Load())
			}
			if tc.successor {
				// A new first round reaches the successor.
				if _, err := callRound(c, "greet", "", nil); !errors.Is(err, catalog.ErrInputRequired) || later.Load() != 1 {
					t.Fatalf("a fresh round: %v, successor ran %d", err, later.Load())
				}
			}
		})
	}
}

// TestAskSeveral: one Ask of three kinds asks all three at once in a
// round, and returns the answers in order once each key has one of its
// kind; an answer of the wrong kind is no answer.
func TestAskSeveral(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var got []catalog.InputResponse
	startTool(t, c, bg, "all", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		var err error
		got, err = catalog.Ask(ctx,
			catalog.InputRequest{Elicit: &catalog.ElicitRequest{Message: "name?"}},
			catalog.InputRequest{Key: "greeting", Sample: &catalog.SampleRequest{Messages: userText("hi"), MaxTokens: 5}},
			catalog.InputRequest{Key: "client_roots", ListRoots: true})
		return catalog.TextResult("ok"), err
	})
	r := &catalog.Round{Elicitation: true, Sampling: true, Roots: true}
	_, err := c.CallTool(bg, "all", nil, "", catalog.WithClient(&catalog.Client{Round: r}))
	ir := inputRequired(t, err)
	var keys []string
	for _, q := range ir.Requests {
		keys = append(keys, q.Key)
	}
	if len(keys) != 3 || keys[0] != "elicitation" || keys[1] != "greeting" || keys[2] != "client_roots" {
		t.Fatalf("asked %v", keys)
	}
	answers := map[string]catalog.InputResponse{
		"elicitation":  accepted("x", 1),
		"greeting":     {Roots: []catalog.Root{}}, // the wrong kind
		"client_roots": {Roots: []catalog.Root{{URI: "file:///r"}}},
	}
	r = &catalog.Round{Instance: ir.Instance, Answers: answers, Elicitation: true, Sampling: true, Roots: true}
	_, err = c.CallTool(bg, "all", nil, "", catalog.WithClient(&catalog.Client{Round: r}))
	if ir := inputRequired(t, err); len(ir.Requests) != 3 {
		t.Fatalf("a wrong-kind answer: asked %d, want all 3 again", len(ir.Requests))
	}
	answers["greeting"] = catalog.InputResponse{Sample: catalog.SampleResult{Role: catalog.RoleAssistant, Content: catalog.Content{Type: "text", Text: "hello"}}}
	r = &catalog.Round{Instance: ir.Instance, Answers: answers, Elicitation: true, Sampling: true, Roots: true}
	if _, err = c.CallTool(bg, "all", nil, "", catalog.WithClient(&catalog.Client{Round: r})); err != nil {
		t.Fatal(err)
	}
	if got[1].Sample.Content.Text != "hello" || got[2].Roots[0].URI != "file:///r" || got[0].Elicit.Action != catalog.ElicitAccept {
		t.Fatalf("answers %+v", got)
	}
}

// TestAskRefuses: what Ask refuses, before anything is asked.
func TestAskRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		round *catalog.Round
		reqs  []catalog.InputRequest
		want  error
	}{
		{"undeclared kind", &catalog.Round{Elicitation: true}, []catalog.InputRequest{{ListRoots: true}}, catalog.ErrNotSupported},
		{"two kinds in one", &catalog.Round{Roots: true, Elicitation: true}, []catalog.InputRequest{{ListRoots: true, Elicit: &nameForm}}, catalog.ErrInvalidRequest},
		{"nothing asked", &catalog.Round{Roots: true}, []catalog.InputRequest{{Key: "k"}}, catalog.ErrInvalidRequest},
		{"one key twice", &catalog.Round{Roots: true}, []catalog.InputRequest{{ListRoots: true}, {ListRoots: true}}, catalog.ErrInvalidRequest},
		{"control character", &catalog.Round{Roots: true}, []catalog.InputRequest{{Key: "a\nb", ListRoots: true}}, catalog.ErrInvalidRequest},
		{"long key", &catalog.Round{Roots: true}, []catalog.InputRequest{{Key: string(make([]byte, catalog.MaxInputKeyBytes+1)), ListRoots: true}}, catalog.ErrInvalidRequest},
		{"empty message", &catalog.Round{Elicitation: true}, []catalog.InputRequest{{Elicit: &catalog.ElicitRequest{}}}, catalog.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			startTool(t, c, bg, "t", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
				_, err := catalog.Ask(ctx, tc.reqs...)
				return catalog.Result{}, err
			})
			r := tc.round
			_, err := c.CallTool(bg, "t", nil, "", catalog.WithClient(&catalog.Client{Round: r}))
			if !errors.Is(err, tc.want) || errors.Is(err, catalog.ErrInputRequired) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(r.Asked()) != 0 {
				t.Fatalf("recorded %v", r.Asked())
			}
		})
	}
}

// TestAskMidCall: a caller asked mid-call gets each question in turn, and
// a roots answer of none is an empty list, not nil.
func TestAskMidCall(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var got []catalog.InputResponse
	startTool(t, c, bg, "t", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		var err error
		got, err = catalog.Ask(ctx, catalog.InputRequest{ListRoots: true}, catalog.InputRequest{Elicit: &nameForm})
		return catalog.TextResult("ok"), err
	})
	var order []string
	cl := &catalog.Client{
		ListRoots: func(context.Context) ([]catalog.Root, error) { order = append(order, "roots"); return nil, nil },
		Elicit: func(_ context.Context, r catalog.ElicitRequest) (catalog.ElicitResult, error) {
			order = append(order, r.Key)
			return catalog.ElicitResult{Action: catalog.ElicitDecline}, nil
		},
	}
	if _, err := c.CallTool(bg, "t", nil, "", catalog.WithClient(cl)); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "roots" || order[1] != "user_name" || got[0].Roots == nil || got[1].Elicit.Action != catalog.ElicitDecline {
		t.Fatalf("asked %v, got %+v", order, got)
	}
}

// TestRoundOtherError: a body that asked but returns an error other than
// ErrInputRequired fails with that error, and one that goes on without the
// answer completes.
func TestRoundOtherError(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	boom := errors.New("boom")
	startTool(t, c, bg, "fails", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		_, _ = call.Elicit(ctx, nameForm)
		return catalog.Result{}, boom
	})
	startTool(t, c, bg, "goes-on", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		if _, err := call.Elicit(ctx, nameForm); err != nil {
			return catalog.TextResult("anonymous"), nil
		}
		return catalog.TextResult("named"), nil
	})
	if _, err := callRound(c, "fails", "", nil); !errors.Is(err, boom) || errors.Is(err, catalog.ErrInputRequired) {
		t.Fatalf("fails: %v", err)
	}
	if res, err := callRound(c, "goes-on", "", nil); err != nil || res.Content[0].Text != "anonymous" {
		t.Fatalf("goes-on: %+v, %v", res, err)
	}
}
