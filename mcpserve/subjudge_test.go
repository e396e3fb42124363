package mcpserve_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// countingAuth counts the authenticator's calls, so that a test sees how
// often a subscription is judged.
type countingAuth struct {
	bindsec.Authenticator
	calls atomic.Int64
}

func (a *countingAuth) Authenticate(ctx context.Context, cred string) (bindsec.Principal, error) {
	a.calls.Add(1)
	return a.Authenticator.Authenticate(ctx, cred)
}

// judgedServer is a Server whose in-memory sessions each present the
// token they were connected with (Options.TransportCredential).
type judgedServer struct {
	srv    *mcpserve.Server
	mu     sync.Mutex
	tokens map[*mcp.ServerSession]string
}

func newJudgedServer(t testing.TB, cat *catalog.Catalog) *judgedServer {
	j := &judgedServer{tokens: map[*mcp.ServerSession]string{}}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(),
		TransportCredential: func(_ context.Context, req mcp.Request) string {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			j.mu.Lock()
			defer j.mu.Unlock()
			return j.tokens[ss]
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	j.srv = srv
	return j
}

// connect connects an in-memory client of protocol tr (memory or
// memoryLegacy) that presents token.
func (j *judgedServer) connect(t testing.TB, tr transport, token string) *surfaceClient {
	ctx := context.Background()
	c := &surfaceClient{prompts: make(chan struct{}, 64), resources: make(chan struct{}, 64), updated: make(chan string, 4096)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "judged-client", Version: "1"}, &mcp.ClientOptions{
		Logger: quietLogger(),
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			c.updated <- r.Params.URI
		},
	})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := j.srv.MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	j.mu.Lock()
	j.tokens[ss] = token
	j.mu.Unlock()
	var o *mcp.ClientSessionOptions
	if tr == memoryLegacy {
		o = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	c.ClientSession, err = cl.Connect(ctx, ct, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const (
	adminToken  = "admin-token"
	viewerToken = "viewer-token"
)

func judgedCatalog(t testing.TB, tokens map[string]bindsec.Principal) (*catalog.Catalog, *countingAuth, *catalog.Consumer) {
	auth := &countingAuth{Authenticator: bindsec.NewStaticTokens(tokens)}
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	k, err := cat.StartResource(context.Background(), catalog.Resource{URI: "test://secret"}, bindsec.Plan{Roles: []string{"admin"}},
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: "secret"}, nil
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return cat, auth, k
}

// TestSubscribeDeniedAsRead: a caller whose resources/read of a resource
// the plan refuses gets the read's own error from resources/subscribe
// (2025-11-25, in memory and over HTTP) and from subscriptions/listen
// (2026-07-28 over HTTP), anonymous or with a role too few; the table
// keeps nothing and holds no slot, and an admitted caller still hears.
func TestSubscribeDeniedAsRead(t *testing.T) {
	const uri = "test://secret"
	for _, tr := range []transport{memoryLegacy, streamable, "http-2026-listen"} {
		for _, token := range []string{"", viewerToken} {
			t.Run(string(tr)+"/"+map[string]string{"": "anonymous", viewerToken: "viewer"}[token], func(t *testing.T) {
				cat, _, k := judgedCatalog(t, map[string]bindsec.Principal{
					adminToken:  bindsec.NewPrincipal("alice", "admin"),
					viewerToken: bindsec.NewPrincipal("victor", "viewer"),
				})
				connect, srv, url := judgedClients(t, cat, tr)
				ctx := ctxGuard(t)
				var want, got *jsonrpc.Error
				if tr == "http-2026-listen" {
					read := firstMessage(t, post(t, url, token, "resources/read", uri, map[string]any{"uri": uri}))
					listen := firstMessage(t, post(t, url, token, "subscriptions/listen", "",
						map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}}))
					require.NotNil(t, read.Error)
					require.NotNil(t, listen.Error, "the listen was admitted: %+v", listen)
					want = &jsonrpc.Error{Code: read.Error.Code, Message: read.Error.Message, Data: read.Error.Data}
					got = &jsonrpc.Error{Code: listen.Error.Code, Message: listen.Error.Message, Data: listen.Error.Data}
				} else {
					c := connect(token)
					_, readErr := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
					subErr := c.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
					require.ErrorAs(t, readErr, &want)
					require.ErrorAs(t, subErr, &got)
				}
				assert.Equal(t, mcpserve.CodeDenied, want.Code, "the read: %v", want)
				assert.Equal(t, want.Code, got.Code)
				assert.Equal(t, want.Message, got.Message)
				assert.Equal(t, string(want.Data), string(got.Data))
				uris, sessions := srv.SubscriptionTable()
				assert.Zero(t, uris, "URIs kept")
				assert.Zero(t, srv.SubscriptionsHeld(), "subscriptions held against the caps")
				if tr == "http-2026-listen" {
					assert.Zero(t, sessions, "sessions kept")
					return
				}

				admin := connect(adminToken)
				require.NoError(t, admin.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
				require.NoError(t, k.Updated())
				assert.Equal(t, uri, nextUpdate(t, admin))
			})
		}
	}
}

// judgedClients returns how to connect a client of tr presenting a
// token, the server, and its URL over HTTP.
func judgedClients(t *testing.T, cat *catalog.Catalog, tr transport) (func(token string) *surfaceClient, *mcpserve.Server, string) {
	if tr == memoryLegacy {
		j := newJudgedServer(t, cat)
		return func(token string) *surfaceClient { return j.connect(t, tr, token) }, j.srv, ""
	}
	f := newFixture(t, cat, mcpserve.Options{})
	return func(token string) *surfaceClient {
		c := &surfaceClient{updated: make(chan string, 64)}
		cl := mcp.NewClient(&mcp.Implementation{Name: "judged-client", Version: "1"}, &mcp.ClientOptions{
			Logger: quietLogger(),
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				c.updated <- r.Params.URI
			},
		})
		var err error
		c.ClientSession, err = cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
			Endpoint: f.http.URL, HTTPClient: bearerClient(token), MaxRetries: -1}, sessionful)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}, f.srv, f.http.URL
}

// TestSubscriptionCredentialExpires: a subscriber hears updates while its
// principal is valid, judged once at the subscribe and not per update;
// once the principal has expired the next update judges it again, drops
// it (from the table and the caps) and does not reach it, and another
// subscriber whose principal does not expire still hears.
func TestSubscriptionCredentialExpires(t *testing.T) {
	for _, tr := range []transport{memoryLegacy, memory} {
		t.Run(string(tr), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shortToken = "short-token"
				cat, auth, k := judgedCatalog(t, map[string]bindsec.Principal{
					adminToken: bindsec.NewPrincipal("alice", "admin"),
					shortToken: bindsec.NewPrincipal("sam", "admin").WithExpires(time.Now().Add(time.Minute)),
				})
				j := newJudgedServer(t, cat)
				short, admin := j.connect(t, tr, shortToken), j.connect(t, tr, adminToken)
				ctx := context.Background()
				go func() { _ = short.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://secret"}) }()
				go func() { _ = admin.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://secret"}) }()
				synctest.Wait()
				require.Equal(t, 2, j.srv.SubscribersOf("test://secret"))
				judged := auth.calls.Load()

				for range 100 {
					require.NoError(t, k.Updated())
					synctest.Wait()
				}
				assert.Len(t, short.updated, 100, "updates heard before the expiry")
				assert.Len(t, admin.updated, 100)
				assert.Equal(t, judged, auth.calls.Load(), "grants judged again before anything changed")

				time.Sleep(time.Minute)
				require.NoError(t, k.Updated())
				synctest.Wait()
				assert.Len(t, short.updated, 100, "an update reached an expired subscriber")
				assert.Len(t, admin.updated, 101)
				assert.Equal(t, 1, j.srv.SubscribersOf("test://secret"))
				assert.Equal(t, 1, j.srv.SubscriptionsHeld())
				assert.Equal(t, judged+1, auth.calls.Load(), "the expired grant alone is judged again")

				require.NoError(t, k.Updated())
				synctest.Wait()
				assert.Len(t, short.updated, 100)
				assert.Len(t, admin.updated, 102)
				assert.Equal(t, judged+1, auth.calls.Load(), "judged again after the expiry was handled")
			})
		})
	}
}

// TestSubscriptionPlanChanges: a subscription admitted by one route's
// plan is judged again by the plan of the route that serves its URI
// next, before that route's first update reaches anyone: a fixed
// resource that shadows the template a viewer subscribed through, and a
// successor that takes a fixed resource over after its owner's death.
func TestSubscriptionPlanChanges(t *testing.T) {
	read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: "x"}, nil }
	for _, tc := range []struct {
		name string
		// first starts the public route the viewer subscribes through;
		// next replaces it, on the same URI, with an admin-only one.
		first func(cat *catalog.Catalog) (*catalog.Consumer, error)
		next  func(cat *catalog.Catalog, old *catalog.Consumer) (*catalog.Consumer, error)
	}{
		{"fixed-shadows-template",
			func(cat *catalog.Catalog) (*catalog.Consumer, error) {
				return cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"}, bindsec.Plan{Public: true}, read)
			},
			func(cat *catalog.Catalog, _ *catalog.Consumer) (*catalog.Consumer, error) {
				return cat.StartResource(context.Background(), catalog.Resource{URI: "test://t/1"}, bindsec.Plan{Roles: []string{"admin"}}, read)
			}},
		{"successor-after-death",
			func(cat *catalog.Catalog) (*catalog.Consumer, error) {
				return cat.StartResource(context.Background(), catalog.Resource{URI: "test://t/1"}, bindsec.Plan{Public: true}, read)
			},
			func(cat *catalog.Catalog, old *catalog.Consumer) (*catalog.Consumer, error) {
				if err := old.Stop(context.Background()); err != nil {
					return nil, err
				}
				return cat.StartResource(context.Background(), catalog.Resource{URI: "test://t/1"}, bindsec.Plan{Roles: []string{"admin"}}, read)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				auth := &countingAuth{Authenticator: bindsec.NewStaticTokens(map[string]bindsec.Principal{
					adminToken:  bindsec.NewPrincipal("alice", "admin"),
					viewerToken: bindsec.NewPrincipal("victor", "viewer"),
				})}
				cat := newCatalog(t, catalog.Config{Authenticator: auth})
				old, err := tc.first(cat)
				require.NoError(t, err)
				j := newJudgedServer(t, cat)
				viewer, admin := j.connect(t, memoryLegacy, viewerToken), j.connect(t, memoryLegacy, adminToken)
				ctx := context.Background()
				require.NoError(t, viewer.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://t/1"}))
				require.NoError(t, admin.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://t/1"}))
				k, err := tc.next(cat, old)
				require.NoError(t, err)
				t.Cleanup(func() { _ = k.Stop(context.Background()); _ = old.Stop(context.Background()) })
				synctest.Wait()
				drain := func(c *surfaceClient) {
					for len(c.updated) > 0 {
						<-c.updated
					}
				}
				drain(viewer)
				drain(admin)
				require.NoError(t, k.Updated())
				synctest.Wait()
				assert.Empty(t, viewer.updated, "the admin-only route's update reached the viewer")
				assert.Len(t, admin.updated, 1)
				assert.Equal(t, 1, j.srv.SubscribersOf("test://t/1"))
			})
		})
	}
}
