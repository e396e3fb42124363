//lint:file-ignore SA1019 these tests check MCP logging and sampling, deprecated as of protocol 2026-07-28 but still served.

package conformance_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/livereg-mcp/internal/conformance"
	"github.com/livereg/livereg/mcpserve"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serve starts every fixture in a catalog of its own and serves it over
// streamable HTTP on loopback, all stopped when the test ends (a consumer
// dropped without Stop dies at garbage collection); it returns the
// endpoint.
func serve(t *testing.T) string {
	t.Helper()
	routes, err := conformance.Routes()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(catalog.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	life, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, r := range routes {
		k, err := r.Start(life, cat)
		if err != nil {
			t.Fatalf("%s %s: %v", r.Kind, r.Name, err)
		}
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Name: "conformance", Version: "1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { h.Close(); _ = srv.Close() })
	return h.URL
}

// text is the text of r's content, its text items joined.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Each fixture is claimed under its kind and name, and no two share one:
// a fleet adopts fixtures by these.
func TestRoutesNamed(t *testing.T) {
	routes, err := conformance.Routes()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	kinds := map[catalog.Kind]int{}
	for _, r := range routes {
		key := string(r.Kind) + " " + r.Name
		if r.Name == "" || seen[key] {
			t.Errorf("route %q: empty or seen twice", key)
		}
		seen[key] = true
		kinds[r.Kind]++
	}
	want := map[catalog.Kind]int{catalog.KindTool: 32, catalog.KindResource: 4, catalog.KindPrompt: 5, catalog.KindTemplate: 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d routes of kind %q, want %d", kinds[k], k, n)
		}
	}
	if len(kinds) != len(want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	for _, name := range []string{"tool test_simple_text", "resource test://static-text", "prompt test_simple_prompt", "resource template test://template/{id}/data"} {
		if !seen[name] {
			t.Errorf("no route %q", name)
		}
	}
}

// TestTalkingFixtures calls the conformance fixtures that talk back to
// their client with the SDK's client, the way the suite's scenarios do.
func TestTalkingFixtures(t *testing.T) {
	url := serve(t)
	logs := make(chan string, 16)
	progress := make(chan float64, 16)
	elicited := make(chan *mcp.ElicitParams, 4)
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		Logger: quiet(),
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logs <- r.Params.Data.(string)
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Progress
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "42"}}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited <- r.Params
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	ctx := ctxGuard(t)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}

	call := func(name string, args map[string]any) string {
		t.Helper()
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		p.SetProgressToken("p1")
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		return text(res)
	}

	call("test_tool_with_logging", nil)
	for _, want := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if got := <-logs; got != want {
			t.Errorf("log %q, want %q", got, want)
		}
	}
	call("test_tool_with_progress", nil)
	for _, want := range []float64{0, 50, 100} {
		if got := <-progress; got != want {
			t.Errorf("progress %v, want %v", got, want)
		}
	}
	if got := call("test_sampling", map[string]any{"prompt": "?"}); !strings.Contains(got, "LLM response: 42") {
		t.Errorf("test_sampling: %s", got)
	}
	for _, tc := range []struct {
		name   string
		args   map[string]any
		fields []string
	}{
		{"test_elicitation", map[string]any{"message": "who?"}, []string{"username", "email"}},
		{"test_elicitation_sep1034_defaults", nil, []string{"name", "age", "score", "status", "verified"}},
		{"test_elicitation_sep1330_enums", nil, []string{"untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti"}},
	} {
		if got := call(tc.name, tc.args); !strings.Contains(got, "decline") {
			t.Errorf("%s: %s", tc.name, got)
		}
		p := <-elicited
		props := p.RequestedSchema.(map[string]any)["properties"].(map[string]any)
		for _, f := range tc.fields {
			if props[f] == nil {
				t.Errorf("%s: the form lacks %q", tc.name, f)
			}
		}
	}

	var schema []byte
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "json_schema_2020_12_tool" {
			schema, _ = json.Marshal(tool.InputSchema)
		}
	}
	for _, want := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs":{"address"`, `"additionalProperties":false`, `"allOf":[{"anyOf"`, `"if":{`, `"$anchor":"addressDef"`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("json_schema_2020_12_tool's schema %s lacks %s", schema, want)
		}
	}
	call("json_schema_2020_12_tool", map[string]any{"name": "n", "address": map[string]any{"city": "c"}, "email": "n@example.com"})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_schema_2020_12_tool", Arguments: map[string]any{"address": map[string]any{"city": 1}, "email": "n@example.com"}}); err == nil {
		t.Error("an address whose city is a number was accepted: the $ref was not followed")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_schema_2020_12_tool", Arguments: map[string]any{"contactMethod": "phone", "email": "n@example.com"}}); err == nil {
		t.Error("contactMethod phone without a phone was accepted: if/then was not applied")
	}
}
