package mcpserve_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// One endpoint serves every client generation: on a default (stateful)
// server, a client of 2025-11-25 holds a session and hears list_changed
// on its standalone stream, a client of 2026-07-28 holds none and hears
// it on subscriptions/listen, and both call the same routes. A 2026-07-28
// request takes no session slot: with the one slot held, it is served.
func TestOneEndpoint(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	startText(t, cat, context.Background(), "hello", "hi")
	f := newFixture(t, cat, mcpserve.Options{MaxSessions: 1})
	legacy := f.connect(streamable, "")
	if v := legacy.InitializeResult().ProtocolVersion; v != legacyVersion || legacy.ID() == "" {
		t.Fatalf("the legacy client negotiated %q with session %q", v, legacy.ID())
	}
	current := f.connectCurrent("")
	if current.ID() != "" {
		t.Errorf("the 2026-07-28 client holds session %q", current.ID())
	}
	for name, c := range map[string]*client{"legacy": legacy, "current": current} {
		res, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "hello"})
		if err != nil || res.IsError || text(t, res) != "hi" {
			t.Fatalf("%s call: %v %+v", name, err, res)
		}
	}
	if held := f.srv.Stats().Sessions.Held; held != 1 {
		t.Errorf("%d sessions held, want the legacy client's alone", held)
	}
	startText(t, cat, context.Background(), "later", "x")
	wait(t, legacy.tools, "list_changed on the legacy session")
	wait(t, current.tools, "list_changed on the listen stream")
}
