package mcpserve_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// surfaceClient is a connected SDK client that records the prompt
// list_changed and resource updated notifications it receives.
type surfaceClient struct {
	*mcp.ClientSession
	prompts   chan struct{}
	resources chan struct{}
	updated   chan string
}

// connectSurface connects a client over tr, as fixture.connect does, with
// handlers for the notifications of prompts and subscriptions.
func (f *fixture) connectSurface(tr transport) *surfaceClient {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := &surfaceClient{prompts: make(chan struct{}, 4096), resources: make(chan struct{}, 4096), updated: make(chan string, 4096)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "surface-client", Version: "1"}, &mcp.ClientOptions{
		Logger:                     quietLogger(),
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { c.prompts <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { c.resources <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.updated <- r.Params.URI
		},
	})
	var err error
	switch tr {
	case memory, memoryLegacy:
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.srv.MCP().Connect(ctx, st, nil); err != nil {
			f.t.Fatal(err)
		}
		var o *mcp.ClientSessionOptions
		if tr == memoryLegacy {
			o = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}
		c.ClientSession, err = cl.Connect(ctx, ct, o)
		if err == nil && tr == memory {
			wait(f.t, f.acks, "subscriptions/listen acknowledged")
		}
	case streamable:
		c.ClientSession, err = cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.http.URL, MaxRetries: -1}, sessionful)
		if err == nil {
			wait(f.t, f.sse, "standalone SSE stream")
		}
	}
	if err != nil {
		f.t.Fatalf("connect over %s: %v", tr, err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

func startPromptT(t testing.TB, cat *catalog.Catalog, ctx context.Context, p catalog.Prompt, h catalog.PromptHandler, opts ...catalog.StartOption) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartPrompt(ctx, p, bindsec.Plan{Public: true}, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

func sayPrompt(text string) catalog.PromptHandler {
	return func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{
			{Role: "user", Content: catalog.Content{Type: "text", Text: fmt.Sprintf("%s %v", text, g.Arguments)}},
		}}, nil
	}
}

func TestPromptsListAndGet(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{PageSize: 2})
			for i := range 5 {
				startPromptT(t, cat, context.Background(), catalog.Prompt{
					Name: fmt.Sprintf("p%d", i), Description: "prompt",
					Arguments: []catalog.PromptArgument{{Name: "who", Required: true}},
				}, sayPrompt("hello"))
			}
			c := f.connectSurface(tr)
			ctx := ctxGuard(t)
			if c.InitializeResult().Capabilities.Prompts == nil {
				t.Fatal("the prompts capability is not advertised")
			}
			var names []string
			for p, err := range c.Prompts(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, p.Name)
				if len(p.Arguments) != 1 || p.Arguments[0].Name != "who" || !p.Arguments[0].Required {
					t.Fatalf("prompt %s arguments %+v", p.Name, p.Arguments)
				}
			}
			if fmt.Sprint(names) != "[p0 p1 p2 p3 p4]" {
				t.Fatalf("listed %v over pages of 2", names)
			}
			res, err := c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p3", Arguments: map[string]string{"who": "ann"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Messages[0].Content.(*mcp.TextContent).Text; got != "hello map[who:ann]" || res.Messages[0].Role != "user" {
				t.Fatalf("got %q from %s", got, res.Messages[0].Role)
			}
			_, err = c.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p3"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("missing required argument: %v", err)
			}
		})
	}
}

// A dead owner's prompt answers exactly as a prompt that never existed.
func TestPromptDeadOwnerLooksUnknown(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	k := startPromptT(t, cat, ctx, catalog.Prompt{Name: "doomed"}, sayPrompt("hi"))
	c := f.connectSurface(memoryLegacy)
	if _, err := c.GetPrompt(ctxGuard(t), &mcp.GetPromptParams{Name: "doomed"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-k.Done()
	_, errDead := c.GetPrompt(ctxGuard(t), &mcp.GetPromptParams{Name: "doomed"})
	_, errNever := c.GetPrompt(ctxGuard(t), &mcp.GetPromptParams{Name: "never"})
	if rpcCode(errDead) != jsonrpc.CodeInvalidParams || rpcCode(errNever) != jsonrpc.CodeInvalidParams {
		t.Fatalf("dead: %v; never: %v", errDead, errNever)
	}
	strip := func(err error, name string) string { return fmt.Sprint(err)[:len(fmt.Sprint(err))-len(name)-2] }
	if strip(errDead, "doomed") != strip(errNever, "never") {
		t.Fatalf("a dead prompt is told apart from an unknown one: %q vs %q", errDead, errNever)
	}
}

func TestPromptsListChanged(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{})
			c := f.connectSurface(tr)
			startPromptT(t, cat, context.Background(), catalog.Prompt{Name: "new"}, sayPrompt("hi"))
			wait(t, c.prompts, "prompts list_changed")
			var names []string
			for p, err := range c.Prompts(ctxGuard(t), nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, p.Name)
			}
			if fmt.Sprint(names) != "[new]" {
				t.Fatalf("listed %v: the sentinel leaked or the prompt is missing", names)
			}
		})
	}
}

func TestPromptsCapabilityFollowsCatalog(t *testing.T) {
	for _, tt := range []struct {
		max  int
		want bool
	}{{0, true}, {3, true}, {-1, false}} {
		cat := newCatalog(t, catalog.Config{MaxPrompts: tt.max})
		f := newFixture(t, cat, mcpserve.Options{})
		c := f.connectSurface(memoryLegacy)
		if got := c.InitializeResult().Capabilities.Prompts != nil; got != tt.want {
			t.Errorf("MaxPrompts %d: prompts advertised %v, want %v", tt.max, got, tt.want)
		}
	}
}
