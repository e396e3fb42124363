package mcpserve_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// deathPath kills a consumer one way; it returns once the consumer's owner
// is dead (its Done channel closed).
type deathPath struct {
	name string
	kill func(t *testing.T, c *client, k **catalog.Consumer, cancel context.CancelFunc)
}

var deathPaths = []deathPath{
	{"stop", func(t *testing.T, _ *client, k **catalog.Consumer, _ context.CancelFunc) {
		if err := (*k).Stop(ctxGuard(t)); err != nil {
			t.Fatal(err)
		}
	}},
	{"cancel", func(t *testing.T, _ *client, k **catalog.Consumer, cancel context.CancelFunc) {
		cancel()
		wait(t, (*k).Done(), "the cancelled owner to die")
	}},
	{"panic", func(t *testing.T, c *client, k **catalog.Consumer, _ context.CancelFunc) {
		res, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "victim", Arguments: map[string]any{"panic": true}})
		if err != nil || !res.IsError || text(t, res) != `tool "victim" failed: internal error` {
			t.Fatalf("panicking call = %+v, %v; want a tool error result", res, err)
		}
		wait(t, (*k).Done(), "the unwound owner to die")
	}},
	{"drop", func(t *testing.T, _ *client, k **catalog.Consumer, _ context.CancelFunc) {
		done := (*k).Done()
		*k = nil // the only reference: the token is collected at a GC
		gcUntil(t, done)
	}},
}

// gcUntil runs the garbage collector until done is closed.
func gcUntil(t *testing.T, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		runtime.GC()
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the dropped consumer was never collected")
		}
	}
}

// victimHandler answers its generation's text, or panics when asked to.
func victimHandler(answer string) catalog.ToolHandler {
	return func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		var in struct{ Panic bool }
		_ = json.Unmarshal(c.Arguments, &in)
		if in.Panic {
			panic("victim told to panic")
		}
		return catalog.TextResult(answer), nil
	}
}

// Each death path: the client is told the list changed, the tool is gone
// from the listing and a call gets -32602; a successor takes the name over
// and the client sees it, told again.
func TestDeathPathsNotifyAndTakeover(t *testing.T) {
	for _, tr := range allTransports {
		for _, dp := range deathPaths {
			t.Run(string(tr)+"/"+dp.name, func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				f := newFixture(t, cat, mcpserve.Options{})
				c := f.connect(tr, "")
				public := bindsec.Plan{Public: true}

				ctxA, cancelA := context.WithCancel(context.Background())
				defer cancelA()
				a, err := cat.StartTool(ctxA, catalog.Tool{Name: "victim"}, public, victimHandler("A"))
				if err != nil {
					t.Fatal(err)
				}
				wait(t, c.tools, "list_changed for the start")
				if res, err := call(t, c, "victim"); err != nil || text(t, res) != "A" {
					t.Fatalf("call A = %+v, %v", res, err)
				}

				dp.kill(t, c, &a, cancelA)
				wait(t, c.tools, "list_changed for the death")
				if names := toolNames(t, c); slices.Contains(names, "victim") {
					t.Fatalf("tools/list after the death = %v", names)
				}
				_, err = call(t, c, "victim")
				if rpcCode(err) != jsonrpc.CodeInvalidParams {
					t.Fatalf("call after the death: err = %v, want -32602", err)
				}

				b, err := cat.StartTool(context.Background(), catalog.Tool{Name: "victim"}, public, victimHandler("B"))
				if err != nil {
					t.Fatalf("takeover: %v", err)
				}
				defer func() { _ = b.Stop(context.Background()) }()
				wait(t, c.tools, "list_changed for the takeover")
				if names := toolNames(t, c); !slices.Equal(names, []string{"victim"}) {
					t.Fatalf("tools/list after the takeover = %v", names)
				}
				if res, err := call(t, c, "victim"); err != nil || text(t, res) != "B" {
					t.Fatalf("call B = %+v, %v", res, err)
				}
				if a != nil {
					_ = a.Stop(context.Background()) // a late stop leaves B alone
					if res, err := call(t, c, "victim"); err != nil || text(t, res) != "B" {
						t.Fatalf("call B after A's late stop = %+v, %v", res, err)
					}
				}
			})
		}
	}
}

func TestResourceDeathNotifiesAndTakeover(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{})
			c := f.connect(tr, "")
			public := bindsec.Plan{Public: true}
			res := catalog.Resource{URI: "test://r", Name: "r", MIMEType: "text/plain"}
			reader := func(text string) catalog.ResourceReader {
				return func(context.Context, catalog.Read) (catalog.Contents, error) {
					return catalog.Contents{Text: text}, nil
				}
			}
			ctxA, cancelA := context.WithCancel(context.Background())
			a, err := cat.StartResource(ctxA, res, public, reader("A"))
			if err != nil {
				t.Fatal(err)
			}
			wait(t, c.resources, "resources list_changed for the start")
			cancelA()
			wait(t, a.Done(), "the owner to die")
			wait(t, c.resources, "resources list_changed for the death")
			lr, err := c.ListResources(ctxGuard(t), nil)
			if err != nil || len(lr.Resources) != 0 {
				t.Fatalf("resources/list after the death = %+v, %v", lr, err)
			}
			_, err = c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "test://r"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("read after the death: err = %v, want -32602", err)
			}
			b, err := cat.StartResource(context.Background(), res, public, reader("B"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = b.Stop(context.Background()) }()
			wait(t, c.resources, "resources list_changed for the takeover")
			rr, err := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "test://r"})
			if err != nil || rr.Contents[0].Text != "B" || rr.Contents[0].MIMEType != "text/plain" {
				t.Fatalf("read B = %+v, %v", rr, err)
			}
		})
	}
}
