package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// surface is a catalog.RemoteSurface that lists the templates a test
// gives it, as package etcdfleet's would list the other replicas' (its
// own included); it lists nothing else, and never changes.
type surface struct{ templates []catalog.ResourceTemplate }

func newSurface(tpls ...string) *surface {
	s := &surface{}
	for _, u := range tpls {
		s.templates = append(s.templates, catalog.ResourceTemplate{URITemplate: u, Name: "fleet"})
	}
	slices.SortFunc(s.templates, func(a, b catalog.ResourceTemplate) int {
		return strings.Compare(templateKey(a.URITemplate), templateKey(b.URITemplate))
	})
	return s
}

func (s *surface) Tools() []catalog.Tool                 { return nil }
func (s *surface) Resources() []catalog.Resource         { return nil }
func (s *surface) Prompts() []catalog.Prompt             { return nil }
func (s *surface) Templates() []catalog.ResourceTemplate { return s.templates }
func (s *surface) ToolsVersion() uint64                  { return 0 }
func (s *surface) ResourcesVersion() uint64              { return 0 }
func (s *surface) PromptsVersion() uint64                { return 0 }
func (s *surface) TemplatesVersion() uint64              { return 1 }
func (s *surface) Watch(func())                          {}

var _ catalog.RemoteSurface = (*surface)(nil)

func templateKey(tpl string) string {
	key, err := catalog.TemplateKey(tpl)
	if err != nil {
		panic(err)
	}
	return key
}

// startSurface starts, on r, a prompt "brief" (argument "topic", which it
// completes) and a template tpl (variable "id", which it completes), both
// for role "reader", whose bodies count their runs and say which replica
// ran them, for whom.
func startSurface(t *testing.T, r *replica, who, tpl string, runs *atomic.Int64) (*catalog.Consumer, *catalog.Consumer) {
	t.Helper()
	plan := bindsec.Plan{Roles: []string{"reader"}}
	complete := func(_ context.Context, rq catalog.CompletionRequest) (catalog.Completion, error) {
		runs.Add(1)
		return catalog.Completion{Values: []string{who + ":" + rq.Argument + ":" + rq.Value}, Total: 1}, nil
	}
	p, err := r.cat.StartPrompt(context.Background(), catalog.Prompt{Name: "brief", Arguments: []catalog.PromptArgument{{Name: "topic", Required: true}}}, plan,
		func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			runs.Add(1)
			return catalog.PromptResult{Description: "from " + who, Messages: []catalog.PromptMessage{
				{Role: "user", Content: catalog.Content{Type: catalog.TypeText, Text: who + " briefs " + g.Principal.Subject() + " on " + g.Arguments["topic"]}},
			}}, nil
		}, catalog.WithCompleter(complete))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	tm, err := r.cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{URITemplate: tpl, Name: who, MIMEType: "text/x-" + who}, plan,
		func(_ context.Context, rd catalog.Read) (catalog.Contents, error) {
			runs.Add(1)
			return catalog.Contents{Text: who + " read " + rd.URI + " for " + rd.Principal.Subject()}, nil
		}, catalog.WithCompleter(complete))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Stop(context.Background()) })
	return p, tm
}

func promptText(t *testing.T, res *mcp.GetPromptResult) string {
	t.Helper()
	if len(res.Messages) != 1 {
		t.Fatalf("prompt result with %d messages", len(res.Messages))
	}
	tc, ok := res.Messages[0].Content.(*mcp.TextContent)
	if !ok {
		t.Fatalf("prompt message is %T", res.Messages[0].Content)
	}
	return tc.Text
}

func readOne(cs *mcp.ClientSession, uri string) (string, string, error) {
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", "", err
	}
	if len(rr.Contents) != 1 {
		return "", "", nil
	}
	return rr.Contents[0].Text, rr.Contents[0].MIMEType, nil
}

// A prompts/get, a templated read and a completion on A for a prompt and
// a template that B holds run on B, under B's owner's plan, with the
// caller's credential, and B's answer comes back as B gave it.
func TestForwardPromptsTemplatesCompletions(t *testing.T) {
	a := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth, Remote: newSurface("notes://{id}")})
	b := newReplica(t)
	var runs atomic.Int64
	startSurface(t, b, "b", "notes://{id}", &runs)
	a.peers.set("prompt", "brief", b.fleet)
	a.peers.set("resource template", "notes://{_}", b.fleet)

	good := connectTo(t, a.url, goodToken)
	ctx := ctxGuard(t)
	res, err := good.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "etcd"}})
	if err != nil || promptText(t, res) != "b briefs alice on etcd" || res.Description != "from b" {
		t.Fatalf("forwarded prompts/get = %+v, %v; want b's briefing of alice", res, err)
	}
	if res.Meta[mcp.MetaKeyServerInfo] != nil {
		t.Fatalf("the forwarded prompt carries the hop's metadata: %v", res.Meta)
	}
	if got, mime, err := readOne(good, "notes://42"); err != nil || got != "b read notes://42 for alice" || mime != "text/x-b" {
		t.Fatalf("forwarded templated read = %q (%s), %v; want b's", got, mime, err)
	}
	for _, ref := range []*mcp.CompleteReference{{Type: "ref/prompt", Name: "brief"}, {Type: "ref/resource", URI: "notes://{id}"}} {
		arg := "topic"
		if ref.Type == "ref/resource" {
			arg = "id"
		}
		cr, err := good.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: "x"}})
		if err != nil || !slices.Equal(cr.Completion.Values, []string{"b:" + arg + ":x"}) || cr.Completion.Total != 1 {
			t.Fatalf("forwarded completion of %+v = %+v, %v; want b's", ref, cr, err)
		}
	}
	if n := runs.Load(); n != 4 {
		t.Fatalf("B's bodies ran %d times; want 4", n)
	}
	// A template ref under other variable names is unknown, as it is
	// locally: it names no template of the fleet's listing.
	if _, err := good.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "notes://{x}"},
		Argument: mcp.CompleteParamsArgument{Name: "x"}}); rpcCode(err) != -32602 || rpcData(err)["reason"] != nil {
		t.Fatalf("completion of a template under other variable names: %v; want unknown", err)
	}

	// The fleet credential does not stand in for the caller's.
	bob := connectTo(t, a.url, noRoleToken)
	if _, err := bob.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "x"}}); rpcCode(err) != mcpserve.CodeDenied {
		t.Fatalf("forwarded prompts/get without the role: %v; want CodeDenied", err)
	}
	if _, _, err := readOne(bob, "notes://1"); rpcCode(err) != mcpserve.CodeDenied {
		t.Fatalf("forwarded read without the role: %v; want CodeDenied", err)
	}
	if _, err := bob.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"},
		Argument: mcp.CompleteParamsArgument{Name: "topic"}}); rpcCode(err) != mcpserve.CodeDenied {
		t.Fatalf("forwarded completion without the role: %v; want CodeDenied", err)
	}
	if n := runs.Load(); n != 4 {
		t.Fatalf("a refused body ran: %d runs, want 4", n)
	}
	// The holder's own errors come back as it gave them: a missing
	// required argument.
	if _, err := good.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief"}); rpcCode(err) != -32602 || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("forwarded prompts/get without its required argument: %v", err)
	}
}

// A prompt or template whose consumer died between A's lookup and B's
// dispatch gives -32602 route_gone, retryable, for a prompts/get, a read
// and a completion alike; the bodies never run.
func TestForwardSurfaceToAGoneRoute(t *testing.T) {
	a := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth, Remote: newSurface("notes://{id}")})
	b := newReplica(t)
	var runs atomic.Int64
	p, tm := startSurface(t, b, "b", "notes://{id}", &runs)
	a.peers.set("prompt", "brief", b.fleet)
	a.peers.set("resource template", "notes://{_}", b.fleet)
	_ = p.Stop(context.Background())
	_ = tm.Stop(context.Background())

	c := connectTo(t, a.url, goodToken)
	ctx := ctxGuard(t)
	gone := func(what string, err error) {
		t.Helper()
		if d := rpcData(err); rpcCode(err) != -32602 || d["reason"] != "route_gone" || d["retryable"] != true {
			t.Fatalf("%s for a route gone on its replica: %v (data %v); want -32602 route_gone", what, err, d)
		}
	}
	_, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "x"}})
	gone("prompts/get", err)
	_, _, err = readOne(c, "notes://1")
	gone("templated read", err)
	_, err = c.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"}, Argument: mcp.CompleteParamsArgument{Name: "topic"}})
	gone("prompt completion", err)
	_, err = c.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "notes://{id}"}, Argument: mcp.CompleteParamsArgument{Name: "id"}})
	gone("template completion", err)
	if n := runs.Load(); n != 0 {
		t.Fatalf("a dead owner's body ran %d times", n)
	}
	// Held nowhere: plainly unknown.
	if _, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nowhere"}); rpcCode(err) != -32602 || !strings.Contains(err.Error(), "unknown prompt") {
		t.Fatalf("prompts/get for a prompt held nowhere: %v; want unknown prompt", err)
	}
}

// A replica that cannot be reached gives a retryable CodePeerUnavailable
// for a prompts/get, a templated read and a completion.
func TestForwardSurfaceToADownPeer(t *testing.T) {
	a := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth, Remote: newSurface("notes://{id}")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/fleet"
	_ = ln.Close()
	a.peers.set("prompt", "brief", down)
	a.peers.set("resource template", "notes://{_}", down)
	c := connectTo(t, a.url, goodToken)
	ctx := ctxGuard(t)
	unavailable := func(what string, err error) {
		t.Helper()
		if d := rpcData(err); rpcCode(err) != mcpserve.CodePeerUnavailable || d["reason"] != "peer_unavailable" || d["retryable"] != true {
			t.Fatalf("%s for a route on a down replica: %v (data %v); want retryable CodePeerUnavailable", what, err, d)
		}
	}
	_, err = c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "brief"})
	unavailable("prompts/get", err)
	_, _, err = readOne(c, "notes://1")
	unavailable("templated read", err)
	_, err = c.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "notes://{id}"}, Argument: mcp.CompleteParamsArgument{Name: "id"}})
	unavailable("template completion", err)
}

// Templates that overlap on two replicas: every replica sends a URI to
// the template the fleet's rule picks, the most specific one wherever it
// lives (ties to the smaller template string), so A and B answer each URI
// alike, each read running once, on the winner's replica.
func TestOverlappingTemplatesAnswerAlike(t *testing.T) {
	// Each catalog's Remote lists both templates, as a fleet's view does.
	fleet := newSurface("notes://{id}", "notes://special-{id}")
	a := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth, Remote: fleet})
	b := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth, Remote: fleet})
	var runs atomic.Int64
	startSurface(t, a, "a", "notes://{id}", &runs)
	startSurface(t, b, "b", "notes://special-{id}", &runs)
	a.peers.set("resource template", "notes://special-{_}", b.fleet)
	b.peers.set("resource template", "notes://{_}", a.fleet)

	for _, r := range []*replica{a, b} {
		c := connectTo(t, r.url, goodToken)
		for uri, want := range map[string]string{
			"notes://special-1": "b read notes://special-1 for alice", // more literal bytes: b's
			"notes://plain":     "a read notes://plain for alice",     // b's does not match
		} {
			before := runs.Load()
			if got, _, err := readOne(c, uri); err != nil || got != want {
				t.Fatalf("read %s through %s = %q, %v; want %q", uri, r.url, got, err, want)
			}
			if n := runs.Load() - before; n != 1 {
				t.Fatalf("read %s ran %d bodies; want 1", uri, n)
			}
		}
	}
}

// A forwarded prompt asks as a local one: a session of 2025-11-25 on A is
// asked the holder's question mid-call, by A, which forwards the get
// again with the answer; a client of 2026-07-28 gets the holder's
// input_required result through A, and its retry through A reaches the
// holder. The body runs once per round, on the holder.
func TestForwardPromptRounds(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	var runs atomic.Int64
	k, err := b.cat.StartPrompt(context.Background(), catalog.Prompt{Name: "hello"}, bindsec.Plan{Public: true},
		func(ctx context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			runs.Add(1)
			ans, err := catalog.Ask(ctx, catalog.InputRequest{Key: "user_name", Elicit: &catalog.ElicitRequest{Key: "user_name", Message: "What is your name?",
				Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}})
			if err != nil {
				return catalog.PromptResult{}, err
			}
			return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "user",
				Content: catalog.Content{Type: "text", Text: fmt.Sprintf("Hello, %v!", ans[0].Elicit.Content["name"])}}}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	a.peers.set(string(catalog.KindPrompt), "hello", b.fleet)

	cs, err := answeringClient(false).Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: a.url, MaxRetries: -1, DisableStandaloneSSE: true}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.GetPrompt(ctxGuard(t), &mcp.GetPromptParams{Name: "hello"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada!" {
		t.Fatalf("a forwarded prompt's question to a 2025-11-25 session: %v %+v", err, res)
	}

	get := func(responses map[string]any, state string) (map[string]any, map[string]any) {
		params := map[string]any{"name": "hello"}
		if responses != nil {
			params["inputResponses"], params["requestState"] = responses, state
		}
		_, res, rpcErr := request2026(t, a.url, "prompts/get", "hello", goodToken, params, map[string]any{"elicitation": map[string]any{}})
		return res, rpcErr
	}
	first, rpcErr := get(nil, "")
	state, _ := first["requestState"].(string)
	if rpcErr != nil || first["resultType"] != "input_required" || state == "" {
		t.Fatalf("a forwarded prompt's first round for a 2026-07-28 client: %v %v", first, rpcErr)
	}
	done, rpcErr := get(adaAnswer, state)
	if rpcErr != nil || !strings.Contains(fmt.Sprint(done["messages"]), "Hello, Ada!") {
		t.Fatalf("its retry through A: %v %v", done, rpcErr)
	}
	// Two runs for each client: the round that asks, and the one that
	// has the answer (A forwards the 2025-11-25 session's get again).
	if runs.Load() != 4 {
		t.Errorf("the holder's prompt ran %d times, want 4", runs.Load())
	}
}
