//lint:file-ignore SA1019 Sampling and roots are deprecated as of protocol 2026-07-28 (SEP-2577) but still served during their deprecation window.

package mcpserve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

var nameForm = catalog.ElicitRequest{Key: "user_name", Message: "What is your name?",
	Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}

// startAskAll starts the tool "ask-all", whose body asks for a name, a
// completion and the roots at once and reports the answers, counting its
// runs.
func startAskAll(t *testing.T, cat *catalog.Catalog, runs *atomic.Int64) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "ask-all"}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			runs.Add(1)
			sample := catalog.SampleRequest{Key: "greeting", MaxTokens: 5,
				Messages: []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: "greet"}}}}
			a, err := catalog.Ask(ctx, catalog.InputRequest{Key: nameForm.Key, Elicit: &nameForm},
				catalog.InputRequest{Key: "greeting", Sample: &sample}, catalog.InputRequest{Key: "roots", ListRoots: true})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(fmt.Sprintf("%v / %s / %s", a[0].Elicit.Content["name"], a[1].Sample.Content.Text, a[2].Roots[0].URI)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

// answeringClient is an SDK client that answers every kind of question.
// Without rounds it knows nothing of input-required results, as a client
// written for 2025-11-25 does not: only a question asked mid-call
// reaches it.
func answeringClient(rounds ...bool) *mcp.Client {
	var mrtr *mcp.MultiRoundTripOptions
	if len(rounds) > 0 && !rounds[0] {
		mrtr = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "rounds", Version: "1"}, &mcp.ClientOptions{
		Logger: quietLogger(), MultiRoundTrip: mrtr,
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "color": "green"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "hello"}}, nil
		},
	})
	cl.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	return cl
}

// One body asks every client generation the same questions and gets the
// same answers: a 2025-11-25 session mid-call (the body runs once), a
// 2026-07-28 client in rounds (its SDK retries with the answers, and the
// body runs again), in memory and over stateless HTTP.
func TestRoundsEveryClientGeneration(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs int64
		dial func(t *testing.T, cat *catalog.Catalog) (mcp.Transport, *mcp.ClientSessionOptions)
	}{
		{"2025-11-25 in memory", 1, func(t *testing.T, cat *catalog.Catalog) (mcp.Transport, *mcp.ClientSessionOptions) {
			return memoryPipe(t, cat), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}},
		{"2025-11-25 over HTTP", 1, func(t *testing.T, cat *catalog.Catalog) (mcp.Transport, *mcp.ClientSessionOptions) {
			f := newFixture(t, cat, mcpserve.Options{})
			return &mcp.StreamableClientTransport{Endpoint: f.http.URL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}},
		{"2026-07-28 in memory", 2, func(t *testing.T, cat *catalog.Catalog) (mcp.Transport, *mcp.ClientSessionOptions) {
			return memoryPipe(t, cat), nil
		}},
		{"2026-07-28 over stateless HTTP", 2, func(t *testing.T, cat *catalog.Catalog) (mcp.Transport, *mcp.ClientSessionOptions) {
			return &mcp.StreamableClientTransport{Endpoint: statelessURL(t, cat, mcpserve.Options{}, true), MaxRetries: -1, DisableStandaloneSSE: true}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			var runs atomic.Int64
			startAskAll(t, cat, &runs)
			tr, o := tc.dial(t, cat)
			cs, err := answeringClient().Connect(ctxGuard(t), tr, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "ask-all", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			if got := text(t, res); got != "Ada / hello / file:///work" {
				t.Errorf("the body answered %q", got)
			}
			if runs.Load() != tc.runs {
				t.Errorf("the body ran %d times, want %d", runs.Load(), tc.runs)
			}
		})
	}
}

// memoryPipe connects an in-memory server transport to a Server for cat
// and returns the client's end.
func memoryPipe(t *testing.T, cat *catalog.Catalog) mcp.Transport {
	t.Helper()
	srv := newServer(t, cat, mcpserve.Options{})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.MCP().Connect(ctxGuard(t), st, nil); err != nil {
		t.Fatal(err)
	}
	return ct
}

// roundCall sends one 2026-07-28 tools/call of name, declaring
// elicitation, with the given answers and state, as bearer (none when
// empty), and returns its result or error.
func roundCall(t *testing.T, url, name, bearer string, responses map[string]any, state string) (map[string]any, map[string]any) {
	t.Helper()
	params := map[string]any{"name": name, "arguments": map[string]any{}}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != "" {
		params["requestState"] = state
	}
	_, res, rpcErr := request2026(t, url, "tools/call", name, bearer, params, map[string]any{"elicitation": map[string]any{}})
	return res, rpcErr
}

// firstRound calls name afresh and returns the state of its input_required
// result.
func firstRound(t *testing.T, url, name, bearer string) string {
	t.Helper()
	res, rpcErr := roundCall(t, url, name, bearer, nil, "")
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("round 1 of %s: %v %v, want input_required with a state", name, res, rpcErr)
	}
	return state
}

// tamper rewrites the payload of a requestState, keeping its MAC: it
// names another consumer instance, as a client hoping to reach a
// successor would.
func tamper(t *testing.T, state string) string {
	t.Helper()
	enc, mac, _ := strings.Cut(state, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	st["i"] = "forged.1"
	payload, _ = json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + mac
}

var adaAnswer = map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}

// startGreeter starts tool name, which asks for a name and greets,
// counting its runs in runs.
func startGreeter(t *testing.T, cat *catalog.Catalog, name string, runs *atomic.Int64) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: name}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			runs.Add(1)
			r, err := c.Elicit(ctx, nameForm)
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(fmt.Sprintf("Hello, %v!", r.Content["name"])), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

// The owner rules of rounds: a retry reaches the body that asked, with
// the caller that asked, and nothing else: a tampered state, another
// caller's, one issued for another tool are refused (-32602); one whose
// consumer died or was replaced is route_gone, retryable, and no body runs,
// the successor's least of all. On both paths.
func TestRoundOwnerRules(t *testing.T) {
	for _, fast := range []bool{true, false} {
		for _, tc := range []struct {
			name   string
			bearer string // the retry's
			// change does what happens between the rounds and returns the
			// state the retry presents.
			change func(t *testing.T, cat *catalog.Catalog, k *catalog.Consumer, state string, successor *atomic.Int64) string
			reason string
		}{
			{"answered", "alice", func(_ *testing.T, _ *catalog.Catalog, _ *catalog.Consumer, s string, _ *atomic.Int64) string {
				return s
			}, ""},
			{"tampered", "alice", func(_ *testing.T, _ *catalog.Catalog, _ *catalog.Consumer, s string, _ *atomic.Int64) string {
				return tamper(t, s)
			}, "invalid_request_state"},
			{"another caller", "mallory", func(_ *testing.T, _ *catalog.Catalog, _ *catalog.Consumer, s string, _ *atomic.Int64) string {
				return s
			}, "invalid_request_state"},
			{"another tool's state", "alice", func(t *testing.T, cat *catalog.Catalog, _ *catalog.Consumer, _ string, _ *atomic.Int64) string {
				return "" // filled in below
			}, "invalid_request_state"},
			{"consumer died", "alice", func(t *testing.T, _ *catalog.Catalog, k *catalog.Consumer, s string, _ *atomic.Int64) string {
				if err := k.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				return s
			}, "route_gone"},
			{"consumer replaced", "alice", func(t *testing.T, cat *catalog.Catalog, k *catalog.Consumer, s string, successor *atomic.Int64) string {
				if err := k.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				startGreeter(t, cat, "greet", successor)
				return s
			}, "route_gone"},
		} {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, tc.name), func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				var runs, other, successor atomic.Int64
				k := startGreeter(t, cat, "greet", &runs)
				startGreeter(t, cat, "other", &other)
				url := statelessURL(t, cat, mcpserve.Options{}, fast)
				state := tc.change(t, cat, k, firstRound(t, url, "greet", "alice"), &successor)
				if state == "" {
					state = firstRound(t, url, "other", "alice")
				}
				before := runs.Load()
				res, rpcErr := roundCall(t, url, "greet", tc.bearer, adaAnswer, state)
				if tc.reason == "" {
					if rpcErr != nil || res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "Hello, Ada!") {
						t.Fatalf("retry: %v %v, want the greeting", res, rpcErr)
					}
					return
				}
				data, _ := rpcErr["data"].(map[string]any)
				if rpcErr["code"] != float64(-32602) || data["reason"] != tc.reason {
					t.Fatalf("retry: result %v, error %v; want -32602 %s", res, rpcErr, tc.reason)
				}
				if tc.reason == "route_gone" && data["retryable"] != true {
					t.Errorf("route_gone not retryable: %v", rpcErr)
				}
				if runs.Load() != before || successor.Load() != 0 {
					t.Errorf("bodies ran: asker %d more, successor %d", runs.Load()-before, successor.Load())
				}
			})
		}
	}
}

// What a retry answers is checked against what was asked: an accepted
// form that does not match its schema, or an answer of another kind, is
// -32602 and no body runs; answers to questions not asked, and answers
// without a state, are ignored, and the body asks again for what it
// lacks.
func TestRoundAnswersChecked(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	var runs atomic.Int64
	startGreeter(t, cat, "greet", &runs)
	url := statelessURL(t, cat, mcpserve.Options{}, true)
	for _, tc := range []struct {
		name      string
		responses map[string]any
		stateless bool // send no state
		want      string
	}{
		{"schema mismatch", map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": 7}}}, false, "error"},
		{"missing required", map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{}}}, false, "error"},
		{"another kind", map[string]any{"user_name": map[string]any{"roots": []any{}}}, false, "error"},
		{"only extra keys", map[string]any{"other": map[string]any{"action": "decline"}}, false, "input_required"},
		{"no state", adaAnswer, true, "input_required"},
		{"declined", map[string]any{"user_name": map[string]any{"action": "decline"}}, false, "complete"},
		{"extra keys beside", map[string]any{"user_name": adaAnswer["user_name"], "x": map[string]any{"action": "cancel"}}, false, "complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := firstRound(t, url, "greet", "")
			if tc.stateless {
				state = ""
			}
			before := runs.Load()
			res, rpcErr := roundCall(t, url, "greet", "", tc.responses, state)
			switch tc.want {
			case "error":
				if rpcErr["code"] != float64(-32602) || runs.Load() != before {
					t.Errorf("got %v %v (body ran %d more); want -32602 and no run", res, rpcErr, runs.Load()-before)
				}
			default:
				if rpcErr != nil || res["resultType"] != tc.want {
					t.Errorf("got %v %v; want %s", res, rpcErr, tc.want)
				}
			}
		})
	}
}

// Through another replica a 2026-07-28 caller's rounds reach the holder:
// its input_required result is relayed, the retry, through the same
// replica or the holder itself, completes there, and once the holder's
// consumer is replaced a retry is route_gone and reaches no body.
func TestForwardRounds(t *testing.T) {
	stateless := func(o *mcpserve.Options) { o.Stateless = true }
	a, b := newReplica(t, stateless), newReplica(t, stateless)
	var runs, successor atomic.Int64
	k := startGreeter(t, b.cat, "greet", &runs)
	a.peers.set("tool", "greet", b.fleet)
	state := firstRound(t, a.url, "greet", goodToken)
	for _, url := range []string{a.url, b.url} {
		res, rpcErr := roundCall(t, url, "greet", goodToken, adaAnswer, state)
		if rpcErr != nil || !strings.Contains(fmt.Sprint(res["content"]), "Hello, Ada!") {
			t.Fatalf("retry at %s: %v %v", url, res, rpcErr)
		}
	}
	if err := k.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	startGreeter(t, b.cat, "greet", &successor)
	res, rpcErr := roundCall(t, a.url, "greet", goodToken, adaAnswer, state)
	data, _ := rpcErr["data"].(map[string]any)
	if data["reason"] != "route_gone" || successor.Load() != 0 {
		t.Fatalf("retry after the restart: %v %v, successor ran %d; want route_gone and none", res, rpcErr, successor.Load())
	}
	if runs.Load() != 3 {
		t.Errorf("the asking body ran %d times, want 3", runs.Load())
	}
	if _, err := mcpserve.New(a.cat, mcpserve.Options{RequestStateKey: make([]byte, mcpserve.MinRequestStateKeyBytes-1)}); err == nil {
		t.Error("a short RequestStateKey was accepted")
	}
}

// Through another replica a session of 2025-11-25 is asked the holder's
// questions mid-call, by the replica it is connected to, which forwards
// the call again with the answers: a tool's and a reader's body ask as
// they would locally, and run once per round on the holder. A session
// that offers nothing gets the body's missing capability, as locally.
func TestForwardRoundsLegacySession(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	var runs, reads atomic.Int64
	// Two rounds: the SDK's own middleware asks an older client once at
	// most; the forwarding replica asks it every round.
	k0, err := b.cat.StartTool(context.Background(), catalog.Tool{Name: "greet"}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			runs.Add(1)
			name, err := c.Elicit(ctx, nameForm)
			if err != nil {
				return catalog.Result{}, err
			}
			color, err := c.Elicit(ctx, catalog.ElicitRequest{Key: "color", Message: "Favourite color?",
				Schema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`)})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(fmt.Sprintf("Hello, %v! (%v)", name.Content["name"], color.Content["color"])), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k0.Stop(context.Background()) })
	k, err := b.cat.StartResource(context.Background(), catalog.Resource{URI: "test://asks", Name: "asks"}, bindsec.Plan{Public: true},
		func(ctx context.Context, r catalog.Read) (catalog.Contents, error) {
			reads.Add(1)
			ans, err := catalog.Ask(ctx, catalog.InputRequest{Key: "roots", ListRoots: true})
			if err != nil {
				return catalog.Contents{}, err
			}
			return catalog.Contents{Text: "in " + ans[0].Roots[0].URI}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	a.peers.set("tool", "greet", b.fleet)
	a.peers.set("resource", "test://asks", b.fleet)

	cs, err := answeringClient(false).Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: a.url, MaxRetries: -1, DisableStandaloneSSE: true}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil || res.IsError || text(t, res) != "Hello, Ada! (green)" {
		t.Fatalf("forwarded call: %v %+v", err, res)
	}
	rr, err := cs.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "test://asks"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "in file:///work" {
		t.Fatalf("forwarded read: %v %+v", err, rr)
	}
	if runs.Load() != 3 || reads.Load() != 2 {
		t.Errorf("the holder's bodies ran %d and %d times, want 3 and 2", runs.Load(), reads.Load())
	}
	plain := connectTo(t, a.url, "")
	res, err = plain.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "not supported") {
		t.Errorf("a session that offers nothing: %v %+v, want the body's missing capability", err, res)
	}
}
