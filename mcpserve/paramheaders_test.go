package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A tool that marks an argument for a header (SEP-2243) is called only
// when the Mcp-Param header agrees with the argument; a request of
// protocol 2026-07-28 that disagrees is refused as the SDK refuses one for
// its own tools (400, -32020 with the request's id), before the body runs,
// on the fast path and off it. Earlier revisions have no such headers. A
// tool started later is checked too: the marked tools follow the listing.
func TestParamHeadersChecked(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast path %v", fast), func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			var runs atomic.Int64
			start := func(name string) {
				k, err := cat.StartTool(context.Background(), catalog.Tool{Name: name,
					InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
					public, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
						runs.Add(1)
						return catalog.TextResult(string(c.Arguments)), nil
					})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = k.Stop(context.Background()) })
			}
			start("routed")
			url := statelessURL(t, cat, mcpserve.Options{}, fast)
			p := &twoPaths{t: t}
			call := func(version, tool, header string) answer {
				ex := hopExchange(version, "tools/call", `{"name":"`+tool+`","arguments":{"region":"eu"}}`, tool, "")
				if header != "" {
					ex.headers["Mcp-Param-Region"] = header
				}
				return p.send(t, url, ex)
			}
			refused := func(a answer) bool {
				msg, _ := a.messages[0].(map[string]any)
				e, _ := msg["error"].(map[string]any)
				return a.status == 400 && len(a.messages) == 1 && msg["id"] == float64(9) && e["code"] == float64(-32020)
			}
			if a := call("2026-07-28", "routed", "eu"); a.status != 200 || runs.Load() != 1 {
				t.Fatalf("a call whose header agrees: %+v, %d runs", a, runs.Load())
			}
			for _, h := range []string{"", "us", "=?base64?ZXU?="} {
				if a := call("2026-07-28", "routed", h); !refused(a) {
					t.Errorf("header %q: %+v; want 400 and -32020 for id 9", h, a)
				}
			}
			if a := call("2026-07-28", "routed", "=?base64?ZXU=?="); a.status != 200 {
				t.Errorf("the header in Base64: %+v", a)
			}
			if a := call("2025-11-25", "routed", ""); a.status != 200 {
				t.Errorf("a 2025-11-25 call, no header: %+v", a)
			}
			start("later")
			if a := call("2026-07-28", "later", ""); !refused(a) {
				t.Errorf("a tool started after the first call, no header: %+v", a)
			}
			if n := runs.Load(); n != 3 {
				t.Errorf("the bodies ran %d times; want 3, none for a refused call", n)
			}
		})
	}
}
