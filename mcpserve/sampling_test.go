//lint:file-ignore SA1019 these tests check MCP sampling, deprecated as of protocol 2026-07-28 but still served.

package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// These tests drive the SDK's client against tool bodies that ask it for
// an LLM completion (sampling/createMessage) or for the user's input
// (elicitation/create).

// connectAsked connects a client over tr with opts (which may set the
// sampling and elicitation handlers). memory connects at protocol
// 2026-07-28, which forbids server requests.
func (f *fixture) connectAsked(tr transport, opts mcp.ClientOptions) *mcp.ClientSession {
	f.t.Helper()
	opts.Logger = quietLogger()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &opts)
	ctx := ctxGuard(f.t)
	var (
		cs  *mcp.ClientSession
		err error
	)
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
		cs, err = cl.Connect(ctx, ct, o)
	case streamable:
		cs, err = cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.http.URL, MaxRetries: -1}, sessionful)
	}
	if err != nil {
		f.t.Fatalf("connect over %s: %v", tr, err)
	}
	f.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type promptIn struct {
	Prompt string `json:"prompt"`
}

// startSampler starts the tool "sample", which asks its caller to
// complete the prompt and answers with the completion, or with the
// error it got as a tool error.
func startSampler(t *testing.T, cat *catalog.Catalog, errs chan<- error) {
	startTyped(t, cat, "sample", func(ctx context.Context, c catalog.Call, in promptIn) (any, error) {
		res, err := c.Sample(ctx, catalog.SampleRequest{
			Messages:     []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: in.Prompt}}},
			MaxTokens:    100,
			SystemPrompt: "be brief",
			Model:        catalog.ModelPreferences{Hints: []string{"small"}, SpeedPriority: 1},
		})
		if errs != nil {
			errs <- err
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"text": res.Content.Text, "model": res.Model, "role": res.Role, "stop": res.StopReason}, nil
	})
}

// TestSamplingRoundTrip: the body's request reaches the client's sampling
// handler as sent, and the completion comes back to the body.
func TestSamplingRoundTrip(t *testing.T) {
	for _, tr := range sdkTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			startSampler(t, cat, nil)
			f := newFixture(t, cat, mcpserve.Options{})
			got := make(chan *mcp.CreateMessageParams, 1)
			cs := f.connectAsked(tr, mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					got <- r.Params
					return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", StopReason: "endTurn",
						Content: &mcp.TextContent{Text: "echo: " + r.Params.Messages[0].Content.(*mcp.TextContent).Text}}, nil
				},
			})
			res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"prompt": "hello"}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			out, _ := json.Marshal(res.StructuredContent)
			if string(out) != `{"model":"test-model","role":"assistant","stop":"endTurn","text":"echo: hello"}` {
				t.Errorf("structured content %s", out)
			}
			p := <-got
			if p.MaxTokens != 100 || p.SystemPrompt != "be brief" || len(p.Messages) != 1 || p.Messages[0].Role != "user" ||
				p.ModelPreferences == nil || len(p.ModelPreferences.Hints) != 1 || p.ModelPreferences.Hints[0].Name != "small" ||
				p.ModelPreferences.SpeedPriority != 1 {
				raw, _ := json.Marshal(p)
				t.Errorf("the client received %s", raw)
			}
		})
	}
}

// elicitSchema has a default for every primitive type (SEP-1034) and an
// enum of each form (SEP-1330).
const elicitSchema = `{"type":"object","properties":{
	"name":{"type":"string","default":"John Doe"},
	"age":{"type":"integer","default":30},
	"verified":{"type":"boolean","default":true},
	"status":{"type":"string","enum":["active","inactive"],"default":"active"},
	"titled":{"type":"string","oneOf":[{"const":"v1","title":"First"},{"const":"v2","title":"Second"}]},
	"legacy":{"type":"string","enum":["o1","o2"],"enumNames":["One","Two"]},
	"multi":{"type":"array","items":{"type":"string","enum":["a","b"]}},
	"titledMulti":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"},{"const":"y","title":"Y"}]}}},
	"required":["titled"]}`

// TestElicitationRoundTrip: the form reaches the client's handler with its
// schema as given, and each of the user's answers comes back to the body;
// an accepted form has the schema's defaults filled in for what the user
// left out.
func TestElicitationRoundTrip(t *testing.T) {
	tests := []struct {
		action  string
		content map[string]any
		want    string
	}{
		{"accept", map[string]any{"titled": "v2", "age": 41, "multi": []any{"b"}},
			`accept {"age":41,"multi":["b"],"name":"John Doe","status":"active","titled":"v2","verified":true}`},
		{"decline", nil, "decline null"},
		{"cancel", nil, "cancel null"},
	}
	for _, tr := range sdkTransports {
		for _, tt := range tests {
			t.Run(string(tr)+"/"+tt.action, func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				startTyped(t, cat, "form", func(ctx context.Context, c catalog.Call, _ struct{}) (any, error) {
					res, err := c.Elicit(ctx, catalog.ElicitRequest{Message: "Who are you?", Schema: json.RawMessage(elicitSchema)})
					if err != nil {
						return nil, err
					}
					content, _ := json.Marshal(res.Content)
					return map[string]any{"answer": fmt.Sprintf("%s %s", res.Action, content)}, nil
				})
				f := newFixture(t, cat, mcpserve.Options{})
				got := make(chan *mcp.ElicitParams, 1)
				cs := f.connectAsked(tr, mcp.ClientOptions{
					ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						got <- r.Params
						return &mcp.ElicitResult{Action: tt.action, Content: tt.content}, nil
					},
				})
				res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "form"})
				if err != nil || res.IsError {
					t.Fatalf("call: %v %+v", err, res)
				}
				if a := res.StructuredContent.(map[string]any)["answer"]; a != tt.want {
					t.Errorf("the body got %q, want %q", a, tt.want)
				}
				p := <-got
				sent, _ := json.Marshal(p.RequestedSchema)
				var want, have any
				_ = json.Unmarshal([]byte(elicitSchema), &want)
				_ = json.Unmarshal(sent, &have)
				if p.Message != "Who are you?" || p.Mode != "form" || fmt.Sprint(want) != fmt.Sprint(have) {
					t.Errorf("the client received %q (mode %q) with schema %s", p.Message, p.Mode, sent)
				}
			})
		}
	}
}

// TestAskWithoutCapability: a client that declared neither capability is
// sent nothing; the body gets catalog.ErrNotSupported, and the tool
// result reports it. (A client of protocol 2026-07-28, which forbids
// server requests, is asked in rounds: TestRoundsEveryClientGeneration.)
func TestAskWithoutCapability(t *testing.T) {
	handlers := mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			t.Error("sampling request sent")
			return nil, errors.New("unexpected")
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("elicitation request sent")
			return nil, errors.New("unexpected")
		},
	}
	tests := []struct {
		name string
		tr   transport
		opts mcp.ClientOptions
	}{
		{"no capability/memory-2025", memoryLegacy, mcp.ClientOptions{}},
		{"no capability/http", streamable, mcp.ClientOptions{}},
		{"elicitation by URL only", memoryLegacy, mcp.ClientOptions{
			ElicitationHandler: handlers.ElicitationHandler,
			Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			errs := make(chan error, 2)
			startSampler(t, cat, errs)
			startTyped(t, cat, "form", func(ctx context.Context, c catalog.Call, _ promptIn) (any, error) {
				_, err := c.Elicit(ctx, catalog.ElicitRequest{Message: "m"})
				errs <- err
				return nil, err
			})
			f := newFixture(t, cat, mcpserve.Options{})
			cs := f.connectAsked(tt.tr, tt.opts)
			for _, name := range []string{"sample", "form"} {
				res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"prompt": "p"}})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !res.IsError || !strings.Contains(text(t, res), "not supported") {
					t.Errorf("%s: got %+v, want a tool error saying it is not supported", name, res)
				}
				if err := <-errs; !errors.Is(err, catalog.ErrNotSupported) {
					t.Errorf("%s: the body got %v, want catalog.ErrNotSupported", name, err)
				}
			}
		})
	}
}

// TestNeverAnsweringClient: a client whose sampling handler never answers
// holds the body only until the body's ctx ends, whether the body set a
// deadline or the client cancelled the call; the client is told to stop
// (over HTTP only while the call's stream lasts), and no goroutine is left
// behind.
func TestNeverAnsweringClient(t *testing.T) {
	for _, tr := range sdkTransports {
		for _, how := range []string{"body deadline", "call cancelled"} {
			t.Run(string(tr)+"/"+how, func(t *testing.T) {
				t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
				cat := newCatalog(t, catalog.Config{})
				bodyErr := make(chan error, 1)
				startTyped(t, cat, "sample", func(ctx context.Context, c catalog.Call, _ struct{}) (any, error) {
					if how == "body deadline" {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
						defer cancel()
					}
					_, err := c.Sample(ctx, catalog.SampleRequest{MaxTokens: 1,
						Messages: []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: "?"}}}})
					bodyErr <- err
					return map[string]any{"gave": "up"}, nil
				})
				f := newFixture(t, cat, mcpserve.Options{})
				asked, told, released := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
				cs := f.connectAsked(tr, mcp.ClientOptions{
					CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						asked <- struct{}{}
						select {
						case <-ctx.Done(): // the server's notifications/cancelled
							told <- struct{}{}
						case <-released:
						}
						return nil, errors.New("no answer")
					},
				})
				// Before the client session closes, which waits for its
				// handlers.
				t.Cleanup(func() { close(released) })
				callCtx, cancel := context.WithCancel(ctxGuard(t))
				defer cancel()
				callErr := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "sample"})
					callErr <- err
				}()
				wait(t, asked, "the sampling request")
				want := context.DeadlineExceeded
				if how == "call cancelled" {
					cancel()
					want = context.Canceled
				}
				select {
				case err := <-bodyErr:
					if !errors.Is(err, want) {
						t.Errorf("the body got %v, want %v", err, want)
					}
				case <-time.After(hangGuard):
					t.Fatal("the body is still waiting for the client")
				}
				err := <-callErr
				if how == "body deadline" && err != nil {
					t.Errorf("the call: %v", err)
				}
				// The SDK cancels its request with notifications/cancelled,
				// sent off the body's path. Over HTTP it travels on the
				// stream of the call's response, which ends as soon as the
				// body returns, so there it is best effort.
				if tr != streamable {
					wait(t, told, "the client's handler to be cancelled")
				}
			})
		}
	}
}

// TestSamplingInProcess: the body that samples over MCP serves in-process
// callers of CallTool too: one that passes a Client with Sample gets its
// completion, one without gets the tool's failure, ErrNotSupported.
func TestSamplingInProcess(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	startSampler(t, cat, nil)
	args := json.RawMessage(`{"prompt":"hi"}`)
	cl := &catalog.Client{Sample: func(_ context.Context, r catalog.SampleRequest) (catalog.SampleResult, error) {
		return catalog.SampleResult{Role: catalog.RoleAssistant, Model: "local", Content: catalog.Content{Type: "text", Text: r.Messages[0].Content.Text + "!"}}, nil
	}}
	res, err := cat.CallTool(ctxGuard(t), "sample", args, "", catalog.WithClient(cl))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.StructuredContent.(json.RawMessage)); got != `{"model":"local","role":"assistant","stop":"","text":"hi!"}` {
		t.Errorf("with a client: %s", got)
	}
	for _, opts := range [][]catalog.CallOption{nil, {catalog.WithClient(&catalog.Client{})}} {
		if _, err := cat.CallTool(ctxGuard(t), "sample", args, "", opts...); !errors.Is(err, catalog.ErrNotSupported) {
			t.Errorf("without Sample: %v, want ErrNotSupported", err)
		}
	}
}
