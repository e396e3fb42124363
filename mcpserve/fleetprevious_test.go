package mcpserve_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// While a fleet rotates its token, the fleet handler also accepts the
// previous ones, and still refuses any other; a previous token shorter
// than the floor is refused as the token is.
func TestFleetHandlerAcceptsPreviousTokens(t *testing.T) {
	const newToken = "the-new-fleet-token-0123456789"
	cat := newCatalog(t, catalog.Config{Authenticator: fleetAuth})
	var runs atomic.Int64
	startGuarded(t, cat, &runs)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: &peerMap{}, Token: newToken, PreviousTokens: []string{fleetToken}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := httptest.NewServer(srv.FleetHandler())
	t.Cleanup(h.Close)
	for _, tc := range []struct {
		token  string
		status int
	}{{newToken, http.StatusOK}, {fleetToken, http.StatusOK}, {"an-unknown-fleet-token-0123456", http.StatusUnauthorized}} {
		req := rawCall(t, h.URL, "guarded")
		req.Header.Set("Authorization", "Bearer "+tc.token)
		req.Header.Set("Livereg-Fleet-Caller", goodToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The holder begins its answer before the body runs: read it
		// whole, so that the call has surely run when the count is read.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
		}
	}
	if runs.Load() != 2 {
		t.Errorf("%d runs, want 2", runs.Load())
	}
	_, err = mcpserve.New(cat, mcpserve.Options{Fleet: &mcpserve.Fleet{Peers: &peerMap{}, Token: newToken, PreviousTokens: []string{"short"}}})
	if !errors.Is(err, mcpserve.ErrInvalidOptions) {
		t.Fatalf("a short previous token: %v, want ErrInvalidOptions", err)
	}
}
