package mcpserve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// TestStrictDecodeFleetHandler: a request forwarded to a holder is held
// to the same rules as one on the public endpoint: a body outside the
// strict decoder's rules gets 400 -32700 and a repeated protocol header
// 400, and neither runs the body.
func TestStrictDecodeFleetHandler(t *testing.T) {
	cat := newCatalog(t, catalog.Config{Authenticator: fleetAuth})
	var runs atomic.Int64
	startGuarded(t, cat, &runs)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: &peerMap{}, Token: fleetToken, Identity: fleetIdentity(t)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	h := httptest.NewServer(srv.FleetHandler())
	t.Cleanup(h.Close)

	tests := []struct {
		name   string
		edit   func(r *http.Request, body string) string
		status int
		code   float64 // JSON-RPC error code; 0 for none
		runs   int64
	}{
		{"as sent", func(_ *http.Request, b string) string { return b }, 200, 0, 1},
		{"duplicate name", func(_ *http.Request, b string) string {
			return strings.Replace(b, `"name":"guarded"`, `"name":"guarded","name":"guarded"`, 1)
		}, 400, -32700, 0},
		{"case-variant argument", func(_ *http.Request, b string) string {
			return strings.Replace(b, `"arguments":{}`, `"arguments":{"a":1,"A":2}`, 1)
		}, 400, -32700, 0},
		{"trailing data", func(_ *http.Request, b string) string { return b + " x" }, 400, -32700, 0},
		{"two Mcp-Name", func(r *http.Request, b string) string { r.Header.Add("Mcp-Name", "guarded"); return b }, 400, 0, 0},
		{"two Mcp-Param-Region", func(r *http.Request, b string) string {
			r.Header.Add("Mcp-Param-Region", "us")
			r.Header.Add("Mcp-Param-Region", "eu")
			return b
		}, 400, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := rawCall(t, h.URL, "guarded")
			raw, err := io.ReadAll(req.Body)
			require.NoError(t, err)
			body := tt.edit(req, string(raw))
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
			req = signed(t, req, "", nil)
			before := runs.Load()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, tt.status, resp.StatusCode, "%s", out)
			if tt.code != 0 {
				var msg struct {
					Error struct {
						Code float64 `json:"code"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal(out, &msg), "%s", out)
				assert.Equal(t, tt.code, msg.Error.Code)
			}
			assert.Equal(t, tt.runs, runs.Load()-before, "runs of the body")
		})
	}
}
