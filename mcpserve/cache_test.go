package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// statelessURL serves cat statelessly with opts, on the fast path or
// the SDK's alone, until the test ends, and returns its URL.
func statelessURL(t *testing.T, cat *catalog.Catalog, opts mcpserve.Options, fast bool) string {
	t.Helper()
	opts.Stateless = true
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	srv, err := mcpserve.New(cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !fast {
		mcpserve.NoFastPath(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); _ = srv.Close() })
	return ts.URL
}

// post2026 sends one 2026-07-28 request to url and returns its result.
func post2026(t *testing.T, url, method string, params map[string]any) map[string]any {
	t.Helper()
	_, res, _ := send2026(t, url, method, params, map[string]any{})
	if res == nil {
		t.Fatalf("%s: no result", method)
	}
	return res
}

// send2026 sends one 2026-07-28 request, declaring caps, to url and
// returns its HTTP status and its result or error. Mcp-Name is the
// params' name or URI.
func send2026(t *testing.T, url, method string, params, caps map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	name, ok := params["name"].(string)
	if !ok {
		name, _ = params["uri"].(string)
	}
	return request2026(t, url, method, name, "", params, caps)
}

// request2026 sends one 2026-07-28 request, declaring caps, with name in
// Mcp-Name (none when empty) and bearer as its token (none when empty),
// and returns its HTTP status and its result or error.
func request2026(t *testing.T, url, method, name, bearer string, params, caps map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string][]string{"MCP-Protocol-Version": {mcpserve.ProtocolStateless}, "Mcp-Method": {method}}
	if name != "" {
		h["Mcp-Name"] = []string{name}
	}
	if bearer != "" {
		h["Authorization"] = []string{"Bearer " + bearer}
	}
	status, got := rawPostBody(t, url, string(body), h)
	// A JSON body, or the last data line of an event stream.
	if i := strings.LastIndex(got, "data: "); i >= 0 {
		got = strings.TrimSpace(got[i+len("data: "):])
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(got), &msg); err != nil {
		t.Fatalf("%s: %q is no JSON-RPC response (%v)", method, got, err)
	}
	return status, msg.Result, msg.Error
}

// Every cacheable 2026-07-28 result carries a caching hint, on the fast
// path and on the SDK's: the listings and server/discover Options.ListTTL,
// public; a read what its reader gave, private unless it said public.
func TestCacheHints(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	ctx := context.Background()
	startText(t, cat, ctx, "echo", "hi")
	start := func(uri string, ttl time.Duration, public bool) {
		k, err := cat.StartResource(ctx, catalog.Resource{URI: uri, Name: uri}, bindsec.Plan{Public: true},
			func(context.Context, catalog.Read) (catalog.Contents, error) {
				return catalog.Contents{Text: "x", CacheTTL: ttl, CachePublic: public}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(ctx) })
	}
	start("test://kept", 90*time.Second+time.Microsecond, true)
	start("test://mine", 1500*time.Millisecond, false)
	start("test://plain", 0, false)
	k, err := cat.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://t/{x}", Name: "t"}, bindsec.Plan{Public: true},
		func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: r.Vars["x"], CacheTTL: time.Minute, CachePublic: true}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(ctx) })

	for _, listTTL := range []time.Duration{0, 45 * time.Second} {
		for _, fast := range []bool{true, false} {
			url := statelessURL(t, cat, mcpserve.Options{ListTTL: listTTL}, fast)
			list := float64(listTTL / time.Millisecond)
			for _, c := range []struct {
				method string
				params map[string]any
				ttl    float64
				scope  string
			}{
				{"tools/list", nil, list, "public"},
				{"resources/list", nil, list, "public"},
				{"resources/templates/list", nil, list, "public"},
				{"prompts/list", nil, list, "public"},
				{"server/discover", nil, list, "public"},
				{"resources/read", map[string]any{"uri": "test://kept"}, 90000, "public"},
				{"resources/read", map[string]any{"uri": "test://mine"}, 1500, "private"},
				{"resources/read", map[string]any{"uri": "test://plain"}, 0, "private"},
				{"resources/read", map[string]any{"uri": "test://t/y"}, 60000, "public"},
			} {
				res := post2026(t, url, c.method, c.params)
				if res["ttlMs"] != c.ttl || res["cacheScope"] != c.scope {
					t.Errorf("ListTTL %v, fast %v: %s %v: ttlMs %v, cacheScope %v; want %v, %q",
						listTTL, fast, c.method, c.params, res["ttlMs"], res["cacheScope"], c.ttl, c.scope)
				}
			}
		}
	}
}

func TestListTTLNegativeIsInvalid(t *testing.T) {
	_, err := mcpserve.New(newCatalog(t, catalog.Config{}), mcpserve.Options{ListTTL: -time.Second})
	if !errors.Is(err, mcpserve.ErrInvalidOptions) {
		t.Fatalf("New with a negative ListTTL = %v, want ErrInvalidOptions", err)
	}
}
