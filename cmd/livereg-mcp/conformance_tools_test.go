//lint:file-ignore SA1019 these tests check MCP logging and sampling, deprecated as of protocol 2026-07-28 but still served.

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTalkingFixtures calls the conformance fixtures that talk back to
// their client with the SDK's client, the way the suite's scenarios do.
func TestTalkingFixtures(t *testing.T) {
	s := startRun(t, config{addr: "127.0.0.1:0", path: "/mcp", conformance: true})
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
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url, MaxRetries: -1}, nil)
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
		return firstText(t, res)
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
	for _, want := range []string{`"$schema":"https://json-schema.org/draft/2020-12/schema"`, `"$defs":{"address"`, `"additionalProperties":false`} {
		if !strings.Contains(string(schema), want) {
			t.Errorf("json_schema_2020_12_tool's schema %s lacks %s", schema, want)
		}
	}
	call("json_schema_2020_12_tool", map[string]any{"name": "n", "address": map[string]any{"city": "c"}})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_schema_2020_12_tool", Arguments: map[string]any{"address": map[string]any{"city": 1}}}); err == nil {
		t.Error("an address whose city is a number was accepted: the $ref was not followed")
	}
}
