package mcpserve_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// The fleet's tokens, current or previous, authenticate no hop: they only
// derive keys. A request that carries one as its bearer token, unsigned,
// is refused; the same request signed by a replica is served; a previous
// token shorter than the floor is refused as the token is.
func TestFleetTokensAuthenticateNoHop(t *testing.T) {
	const newToken = "the-new-fleet-token-0123456789"
	cat := newCatalog(t, catalog.Config{Authenticator: fleetAuth})
	var runs atomic.Int64
	startGuarded(t, cat, &runs)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: newToken, PreviousTokens: []string{fleetToken}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	h := httptest.NewServer(srv.FleetHandler())
	t.Cleanup(h.Close)
	do := func(req *http.Request) int {
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		// The holder begins its answer before the body runs: read it
		// whole, so that the call has surely run when the count is read.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, token := range []string{newToken, fleetToken} {
		req := rawCall(t, h.URL, "guarded")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Livereg-Fleet-Caller", goodToken)
		req.Header.Set("Livereg-Fleet-Hop", "1")
		assert.Equal(t, http.StatusUnauthorized, do(req))
	}
	assert.Zero(t, runs.Load(), "a fleet token reached the catalog")
	assert.Equal(t, http.StatusOK, do(signed(t, rawCall(t, h.URL, "guarded"), h.URL, nil)))
	assert.EqualValues(t, 1, runs.Load())

	_, err = mcpserve.New(cat, mcpserve.Options{Fleet: &mcpserve.Fleet{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: newToken, PreviousTokens: []string{"short"}}})
	require.ErrorIs(t, err, mcpserve.ErrInvalidOptions, "a short previous token")
}
