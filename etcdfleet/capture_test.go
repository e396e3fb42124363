package etcdfleet_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// captured is one request a capture listener received: enough to replay it.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// capture records every request it receives and passes it on to next,
// which is set before the first request arrives.
type capture struct {
	mu   sync.Mutex
	reqs []captured
	next http.Handler
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	c.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

func (c *capture) all() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

// bearer adds a caller's bearer token to every request it carries.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// servedAuth serves a replica named name, joined at ep, whose catalog
// knows auth's tokens, on ln, advertising advertise as its fleet endpoint.
func servedAuth(t *testing.T, ep, name string, ln net.Listener, advertise string, auth bindsec.Authenticator) (*catalog.Catalog, *mcpserve.Server) {
	t.Helper()
	r := joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second,
		Replica: name, Advertise: advertise})
	cat, err := catalog.New(catalog.Config{Claimer: r, Remote: r.Remote(), Authenticator: auth})
	require.NoError(t, err)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: slog.New(slog.DiscardHandler), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: r, Token: fleetToken, Advertise: advertise}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served; _ = srv.Close() })
	return cat, srv
}

func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln, "http://" + ln.Addr().String()
}

// Replica b advertises a capture listener that records every hop request
// before passing it to b's fleet handler; a caller with a bearer token
// calls b's tool through replica a. Nothing captured holds the fleet
// token, the caller's token, the authority's seed or the etcd passwords
// once or now derived from the token, in any common encoding; replayed to
// b's fleet endpoint or to a's, a captured request is refused (401); and
// no header value is an etcd password, so there is nothing to try on etcd.
func TestCapturedHopReplaysNothing(t *testing.T) {
	ep := startEtcd(t)
	const callerToken = "caller-token-fedcba9876543210"
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{callerToken: bindsec.NewPrincipal("carol", "user")})

	lnA, baseA := listen(t)
	servedAuth(t, ep, "a", lnA, baseA+mcpserve.DefaultFleetPath, auth)
	capt := &capture{}
	cs := httptest.NewServer(capt)
	t.Cleanup(cs.Close)
	lnB, baseB := listen(t)
	catB, srvB := servedAuth(t, ep, "b", lnB, cs.URL+mcpserve.DefaultFleetPath, auth)
	capt.next = srvB.FleetHandler()

	life := lifeFor(t)
	k, err := catB.StartTool(life, catalog.Tool{Name: "guarded"}, bindsec.Plan{Roles: []string{"user"}},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("ran on b"), nil
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(context.Background()) })

	ctx := ctxFor(t)
	cl := mcp.NewClient(&mcp.Implementation{Name: "capture-test", Version: "1"}, nil)
	sess, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: baseA + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{callerToken}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sess.Close() })
	require.Eventually(t, func() bool {
		got, err := callText(ctx, sess, "guarded")
		return err == nil && got == "ran on b"
	}, 10*time.Second, 20*time.Millisecond, "a forwards the caller's call to b's tool")

	reqs := capt.all()
	require.NotEmpty(t, reqs, "the hop went through the capture listener")

	userPW, err := hkdf.Key(sha256.New, []byte(fleetToken), nil, "livereg etcd fleet user v1", sha256.Size)
	require.NoError(t, err)
	rootPW := hmacOf(fleetToken, "livereg etcd root v1")
	secrets := map[string][]byte{
		"the fleet token":          []byte(fleetToken),
		"the caller's token":       []byte(callerToken),
		"the authority's seed":     etcdfleet.AuthoritySeed(fleetToken),
		"the etcd fleet password":  userPW,
		"the legacy root password": rootPW,
	}
	passwords := append(secretForms(userPW), secretForms(rootPW)...)
	for i, c := range reqs {
		for what, secret := range secrets {
			for _, form := range secretForms(secret) {
				for name, vs := range c.header {
					for _, v := range vs {
						assert.NotContains(t, v, form, "request %d: header %s holds %s", i, name, what)
					}
				}
				assert.NotContains(t, string(c.body), form, "request %d: the body holds %s", i, what)
			}
		}
		for name, vs := range c.header {
			for _, v := range vs {
				assert.NotContains(t, passwords, strings.TrimPrefix(v, "Bearer "), "request %d: header %s is an etcd password", i, name)
			}
		}
	}

	// Each captured request, sent again as it was, to b's real fleet
	// endpoint and to a's: both refuse it, at the hop's door.
	replay := func(base string, c captured) int {
		req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, bytes.NewReader(c.body))
		require.NoError(t, err)
		req.Header = c.header.Clone()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for i, c := range reqs {
		assert.Equal(t, http.StatusUnauthorized, replay(baseB, c), "request %d replayed to b", i)
		assert.Equal(t, http.StatusUnauthorized, replay(baseA, c), "request %d replayed to a", i)
	}
}
