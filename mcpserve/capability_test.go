package mcpserve_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A body that cannot do without a capability the 2026-07-28 request did
// not declare returns Sample's error, and the client gets -32021 with HTTP
// 400 naming it; a request that declared it is asked (input_required),
// and a body that goes on without it answers; on both paths.
func TestMissingCapability(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	ctx := context.Background()
	start := func(name string, body catalog.ToolHandler) {
		k, err := cat.StartTool(ctx, catalog.Tool{Name: name}, bindsec.Plan{Public: true}, body)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(ctx) })
	}
	start("needs-sampling", func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		_, err := c.Sample(ctx, catalog.SampleRequest{Messages: []catalog.SampleMessage{{Role: "user", Content: catalog.Content{Type: "text", Text: "hi"}}}, MaxTokens: 5})
		return catalog.Result{}, err
	})
	start("needs-elicitation", func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		_, err := c.Elicit(ctx, catalog.ElicitRequest{Message: "name?"})
		return catalog.Result{}, err
	})
	// A body that says it lacks a capability the request did declare
	// (its own CapabilityError): its error, not -32021, which would tell
	// the client it did not declare what it did.
	start("says-missing", func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{}, &catalog.CapabilityError{Tool: "says-missing", Capability: "sampling"}
	})
	start("does-without", func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		if _, err := c.Sample(ctx, catalog.SampleRequest{Messages: []catalog.SampleMessage{{Role: "user", Content: catalog.Content{Type: "text", Text: "hi"}}}, MaxTokens: 5}); err != nil {
			return catalog.TextResult("did without"), nil
		}
		return catalog.TextResult("sampled"), nil
	})
	for _, fast := range []bool{true, false} {
		url := statelessURL(t, cat, mcpserve.Options{}, fast)
		for _, capability := range []string{"sampling", "elicitation"} {
			call := map[string]any{"name": "needs-" + capability, "arguments": map[string]any{}}
			status, res, rpcErr := send2026(t, url, "tools/call", call, map[string]any{})
			data, _ := rpcErr["data"].(map[string]any)
			need, _ := data["requiredCapabilities"].(map[string]any)
			if _, named := need[capability].(map[string]any); status != http.StatusBadRequest || rpcErr["code"] != float64(-32021) || !named || len(need) != 1 {
				t.Errorf("fast %v, %s undeclared: HTTP %d, result %v, error %v; want 400, -32021 naming it", fast, capability, status, res, rpcErr)
			}
			call = map[string]any{"name": "needs-" + capability, "arguments": map[string]any{}}
			status, res, rpcErr = send2026(t, url, "tools/call", call, map[string]any{capability: map[string]any{}})
			if status != http.StatusOK || rpcErr != nil || res["resultType"] != "input_required" {
				t.Errorf("fast %v, %s declared: HTTP %d, result %v, error %v; want input_required", fast, capability, status, res, rpcErr)
			}
		}
		status, res, rpcErr := send2026(t, url, "tools/call", map[string]any{"name": "says-missing", "arguments": map[string]any{}}, map[string]any{"sampling": map[string]any{}})
		if status != http.StatusOK || rpcErr != nil || res["isError"] != true {
			t.Errorf("fast %v, a body's own CapabilityError for a declared capability: HTTP %d, result %v, error %v; want its tool error", fast, status, res, rpcErr)
		}
		res = post2026(t, url, "tools/call", map[string]any{"name": "does-without", "arguments": map[string]any{}})
		if res["isError"] == true || res["content"] == nil {
			t.Errorf("fast %v: a body that does without sampling: %v", fast, res)
		}
	}
}

// Through another replica a body's missing capability is judged as on its
// own: the hop declares what the 2026-07-28 caller declared, and a 2025
// caller gets the tool error a local call gives it.
func TestForwardMissingCapability(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		tune := func(o *mcpserve.Options) { o.Stateless = stateless }
		a, b := newReplica(t, tune), newReplica(t, tune)
		k, err := b.cat.StartTool(context.Background(), catalog.Tool{Name: "needs-sampling"}, bindsec.Plan{Public: true},
			func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
				_, err := c.Sample(ctx, catalog.SampleRequest{Messages: []catalog.SampleMessage{{Role: "user", Content: catalog.Content{Type: "text", Text: "hi"}}}, MaxTokens: 5})
				return catalog.Result{}, err
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
		a.peers.set("tool", "needs-sampling", b.fleet)
		if stateless {
			call := func() map[string]any { return map[string]any{"name": "needs-sampling", "arguments": map[string]any{}} }
			status, _, rpcErr := send2026(t, a.url, "tools/call", call(), map[string]any{})
			if status != http.StatusBadRequest || rpcErr["code"] != float64(-32021) {
				t.Errorf("forwarded, undeclared: HTTP %d, error %v; want 400, -32021", status, rpcErr)
			}
			status, res, rpcErr := send2026(t, a.url, "tools/call", call(), map[string]any{"sampling": map[string]any{}})
			if status != http.StatusOK || rpcErr != nil || res["resultType"] != "input_required" {
				t.Errorf("forwarded, declared: HTTP %d, result %v, error %v; want the holder's input_required", status, res, rpcErr)
			}
			continue
		}
		// A 2025 client that declared no sampling, through a and on b.
		var got []string
		for _, url := range []string{a.url, b.url} {
			res, err := connectTo(t, url, "").CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "needs-sampling", Arguments: map[string]any{}})
			if err != nil || !res.IsError {
				t.Fatalf("2025 call at %s: %v, %v; want a tool error", url, res, err)
			}
			got = append(got, text(t, res))
		}
		if got[0] != got[1] {
			t.Errorf("2025 tool error forwarded %q, local %q", got[0], got[1])
		}
	}
}
