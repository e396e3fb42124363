package mcpserve_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

func completeFrom(words ...string) catalog.Completer {
	return func(_ context.Context, r catalog.CompletionRequest) (catalog.Completion, error) {
		var out []string
		for _, w := range words {
			if strings.HasPrefix(w, r.Value) && r.Context["skip"] != w {
				out = append(out, w)
			}
		}
		return catalog.Completion{Values: out}, nil
	}
}

func TestCompletion(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			f := newFixture(t, cat, mcpserve.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			k := startPromptT(t, cat, ctx, catalog.Prompt{Name: "city", Arguments: []catalog.PromptArgument{{Name: "name"}}},
				sayPrompt("hi"), catalog.WithCompleter(completeFrom("paris", "park", "rome")))
			startTemplateT(t, cat, context.Background(), catalog.ResourceTemplate{URITemplate: "test://c/{id}"}, varsReader("c"),
				catalog.WithCompleter(completeFrom("10", "11", "20")))
			startPromptT(t, cat, context.Background(), catalog.Prompt{Name: "plain", Arguments: []catalog.PromptArgument{{Name: "a"}}}, sayPrompt("hi"))
			c := f.connectSurface(tr)
			if c.InitializeResult().Capabilities.Completions == nil {
				t.Fatal("completions are not advertised")
			}
			g := ctxGuard(t)
			complete := func(ref *mcp.CompleteReference, arg, value string, given map[string]string) ([]string, error) {
				p := &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}}
				if given != nil {
					p.Context = &mcp.CompleteContext{Arguments: given}
				}
				res, err := c.Complete(g, p)
				if err != nil {
					return nil, err
				}
				if res.Completion.Values == nil {
					t.Fatal("values is null")
				}
				return res.Completion.Values, nil
			}
			city := &mcp.CompleteReference{Type: "ref/prompt", Name: "city"}
			for _, tt := range []struct {
				ref        *mcp.CompleteReference
				arg, value string
				given      map[string]string
				want       string
			}{
				{city, "name", "par", nil, "[paris park]"},
				{city, "name", "par", map[string]string{"skip": "park"}, "[paris]"},
				{&mcp.CompleteReference{Type: "ref/resource", URI: "test://c/{id}"}, "id", "1", nil, "[10 11]"},
				{&mcp.CompleteReference{Type: "ref/prompt", Name: "plain"}, "a", "x", nil, "[]"},
			} {
				got, err := complete(tt.ref, tt.arg, tt.value, tt.given)
				if err != nil || fmt.Sprint(got) != tt.want {
					t.Errorf("%+v %s=%q: %v, %v; want %s", tt.ref, tt.arg, tt.value, got, err, tt.want)
				}
			}
			_, errUnknown := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "town"}, "name", "p", nil)
			cancel()
			<-k.Done()
			_, errDead := complete(city, "name", "p", nil)
			if rpcCode(errDead) != jsonrpc.CodeInvalidParams || rpcCode(errUnknown) != jsonrpc.CodeInvalidParams {
				t.Fatalf("dead: %v; unknown: %v", errDead, errUnknown)
			}
			if strings.Replace(errDead.Error(), "city", "town", 1) != errUnknown.Error() {
				t.Fatalf("a dead owner's prompt is told apart: %q vs %q", errDead, errUnknown)
			}
		})
	}
}
