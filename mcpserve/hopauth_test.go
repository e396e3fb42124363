package mcpserve_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// fleetDo sends req and returns its status and whole body.
func fleetDo(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The fleet endpoint serves only a request signed by a replica it
// believes, for its own endpoint, over the body and headers it carries,
// within the replay window, once, asserting an unexpired principal; the
// holder judges the call on that principal and never on a token from
// the wire. Every refusal is a 401 that reaches no catalog.
func TestFleetHandlerNeedsASignedRequest(t *testing.T) {
	b := newReplica(t)
	var runs atomic.Int64
	startGuarded(t, b.cat, &runs)
	call := func() *http.Request {
		req := rawCall(t, b.fleet, "guarded")
		req.Header.Set("Livereg-Fleet-Hop", "1")
		return req
	}
	now := time.Now()
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		answer string // in the body of a 200
	}{
		{"unsigned, with the fleet token", func() *http.Request {
			req := call()
			req.Header.Set("Authorization", "Bearer "+fleetToken)
			req.Header.Set("Livereg-Fleet-Caller", goodToken)
			return req
		}, http.StatusUnauthorized, ""},
		{"signed by a key no replica enrolled", func() *http.Request {
			return signed(t, call(), b.fleet, nil, strangerIdentity(t))
		}, http.StatusUnauthorized, ""},
		{"signed for another endpoint", func() *http.Request {
			return signed(t, call(), "http://127.0.0.1:9/fleet", nil)
		}, http.StatusUnauthorized, ""},
		{"an expired principal assertion", func() *http.Request {
			return signed(t, call(), b.fleet, &mcpserve.HopAssertion{Token: goodToken, Subject: "alice", Roles: []string{"reader"}, Expires: now.Add(-time.Second)})
		}, http.StatusUnauthorized, ""},
		{"a timestamp before the window", func() *http.Request {
			return signedAt(t, call(), b.fleet, nil, now.Add(-31*time.Second))
		}, http.StatusUnauthorized, ""},
		{"a timestamp after the window", func() *http.Request {
			return signedAt(t, call(), b.fleet, nil, now.Add(31*time.Second))
		}, http.StatusUnauthorized, ""},
		{"its body changed after signing", func() *http.Request {
			req := signed(t, call(), b.fleet, nil)
			other := rawCall(t, b.fleet, "guarder")
			req.Body, req.ContentLength = other.Body, other.ContentLength
			return req
		}, http.StatusUnauthorized, ""},
		{"its assertion changed after signing", func() *http.Request {
			req := signed(t, call(), b.fleet, &mcpserve.HopAssertion{Token: noRoleToken, Subject: "bob"})
			alice := signed(t, call(), b.fleet, nil)
			req.Header.Set("Livereg-Fleet-Principal", alice.Header.Get("Livereg-Fleet-Principal"))
			return req
		}, http.StatusUnauthorized, ""},
		{"anonymous, with a caller's token beside it", func() *http.Request {
			req := call()
			req.Header.Set("Livereg-Fleet-Caller", goodToken)
			req.Header.Set("Authorization", "Bearer "+goodToken)
			return signed(t, req, b.fleet, &mcpserve.HopAssertion{})
		}, http.StatusOK, "credential is required"},
		{"a principal the forwarder's authenticator refused", func() *http.Request {
			return signed(t, call(), b.fleet, &mcpserve.HopAssertion{Token: goodToken, Subject: "alice", Roles: []string{"reader"}, Refused: true})
		}, http.StatusOK, "credential is required"},
		{"bob, who lacks the role", func() *http.Request {
			return signed(t, call(), b.fleet, &mcpserve.HopAssertion{Token: noRoleToken, Subject: "bob"})
		}, http.StatusOK, "lacks a role"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := fleetDo(t, tc.req())
			require.Equal(t, tc.status, status, body)
			assert.NotContains(t, body, fleetToken)
			assert.NotContains(t, body, goodToken)
			if tc.answer != "" {
				assert.Contains(t, body, tc.answer)
			}
			assert.Zero(t, runs.Load(), "the body ran")
		})
	}
	// The same request, signed as a forwarder signs it, is served, once.
	req := signed(t, call(), b.fleet, nil)
	replay := req.Clone(ctxGuard(t))
	replay.Body, _ = req.GetBody()
	status, body := fleetDo(t, req)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "hello alice")
	assert.EqualValues(t, 1, runs.Load())
	status, body = fleetDo(t, replay)
	require.Equal(t, http.StatusUnauthorized, status, body)
	assert.Contains(t, body, "nonce")
	assert.EqualValues(t, 1, runs.Load(), "a replay ran the body")
}

// captured is a request a listener recorded.
type captured struct {
	method, uri string
	header      http.Header
	body        []byte
}

// A listener that replica B advertises as its fleet endpoint, relaying to
// B, sees every hop request A sends B: none carries the fleet token or
// the caller's, and none authenticates a second request: replayed to B,
// or with its body changed, it is refused.
func TestHopCaptureCarriesNoToken(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []captured
		b    *replica
	)
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if !assert.NoError(t, err) {
			return
		}
		mu.Lock()
		seen = append(seen, captured{r.Method, r.RequestURI, r.Header.Clone(), body})
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	t.Cleanup(capture.Close)
	endpoint := capture.URL + mcpserve.DefaultFleetPath
	b = newReplica(t, func(o *mcpserve.Options) { o.Fleet.Advertise = endpoint })
	var runs atomic.Int64
	startGuarded(t, b.cat, &runs)
	a := newReplica(t)
	a.peers.set("tool", "guarded", endpoint)
	a.peers.set("resource", "secret://doc", endpoint)

	c := connectTo(t, a.url, goodToken)
	res, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "hello alice", text(t, res))
	rr, err := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "classified for alice", rr.Contents[0].Text)

	mu.Lock()
	got := append([]captured(nil), seen...)
	mu.Unlock()
	require.Len(t, got, 2)
	for _, m := range got {
		var wire bytes.Buffer
		require.NoError(t, m.header.Write(&wire))
		wire.Write(m.body)
		// The assertion is base64: what it says, decoded, too.
		assertion, err := base64.RawURLEncoding.DecodeString(m.header.Get("Livereg-Fleet-Principal"))
		require.NoError(t, err)
		require.Contains(t, string(assertion), `"alice"`)
		wire.Write(assertion)
		assert.NotContains(t, wire.String(), fleetToken, "the fleet token crossed the hop")
		assert.NotContains(t, wire.String(), goodToken, "the caller's token crossed the hop")
		assert.Empty(t, m.header.Values("Authorization"))
	}

	resend := func(m captured, url string, body []byte) (int, string) {
		req, err := http.NewRequestWithContext(ctxGuard(t), m.method, url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header = m.header.Clone()
		return fleetDo(t, req)
	}
	for i, m := range got {
		status, body := resend(m, b.fleet, m.body)
		assert.Equal(t, http.StatusUnauthorized, status, "replay %d to the holder: %s", i, body)
		assert.Contains(t, body, "nonce")
		changed := bytes.Replace(m.body, []byte(`"id":`), []byte(`"id": `), 1)
		require.NotEqual(t, m.body, changed)
		status, body = resend(m, b.fleet, changed)
		assert.Equal(t, http.StatusUnauthorized, status, "request %d with its body changed: %s", i, body)
		assert.Contains(t, body, "signature")
	}
	assert.EqualValues(t, 2, runs.Load(), "a captured request ran a body again")
	assert.True(t, strings.HasPrefix(got[0].uri, mcpserve.DefaultFleetPath))
}

// identityPeers is Peers that is also the replica's Identity, as package
// etcdfleet's Replica is.
type identityPeers struct {
	*peerMap
	*mcpserve.Keyring
}

// New takes the Identity from Fleet.Identity, or else from Peers, and
// refuses a Fleet with neither, and a negative window or nonce bound.
func TestFleetIdentityOptions(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for name, f := range map[string]*mcpserve.Fleet{
		"no identity":          {Peers: &peerMap{}, Token: fleetToken},
		"negative window":      {Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, ReplayWindow: -time.Second},
		"negative nonce bound": {Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, MaxHopNonces: -1},
	} {
		_, err := mcpserve.New(cat, mcpserve.Options{Path: "/mcp", Fleet: f})
		assert.ErrorIs(t, err, mcpserve.ErrInvalidOptions, name)
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: identityPeers{&peerMap{}, fleetIdentity(t)}, Token: fleetToken}})
	require.NoError(t, err, "Peers that is an Identity")
	require.NoError(t, srv.Close())
}
