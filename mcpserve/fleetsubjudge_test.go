package mcpserve_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// A subscription through replica B to a URI replica A serves is judged
// by A's plan for the caller: a caller without the role gets, from
// resources/subscribe and from subscriptions/listen on B, the error its
// read through B gets, and neither replica keeps it; a caller with the
// role is followed and hears A's updates.
func TestFleetSubscribeJudgedByHolder(t *testing.T) {
	const uri = "test://secret"
	a, b := newReplica(t), newReplica(t)
	k, err := a.cat.StartResource(context.Background(), catalog.Resource{URI: uri}, bindsec.Plan{Roles: []string{"reader"}},
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: "secret"}, nil
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	b.peers.set("resource", uri, a.fleet)

	connect := func(token string) (*mcp.ClientSession, chan string) {
		updated := make(chan string, 64)
		cl := mcp.NewClient(&mcp.Implementation{Name: "fleet-judged", Version: "1"}, &mcp.ClientOptions{
			Logger: quietLogger(),
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				updated <- r.Params.URI
			},
		})
		cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
			Endpoint: b.url, HTTPClient: bearerClient(token), MaxRetries: -1}, sessionful)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs, updated
	}

	for _, token := range []string{"", noRoleToken} {
		cs, _ := connect(token)
		_, readErr := cs.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: uri})
		subErr := cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri})
		var want, got *jsonrpc.Error
		require.ErrorAs(t, readErr, &want)
		require.ErrorAs(t, subErr, &got, "resources/subscribe on B presenting %q", token)
		assert.Equal(t, mcpserve.CodeDenied, want.Code)
		assert.Equal(t, want.Code, got.Code)
		assert.Equal(t, want.Message, got.Message)

		listen := firstMessage(t, post(t, b.url, token, "subscriptions/listen", "",
			map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}}))
		require.NotNil(t, listen.Error, "subscriptions/listen on B presenting %q was admitted", token)
		assert.Equal(t, want.Code, listen.Error.Code)
		assert.Equal(t, want.Message, listen.Error.Message)

		uris, _ := b.srv.SubscriptionTable()
		assert.Zero(t, uris, "B kept the refused subscription")
		assert.Zero(t, a.srv.SubscribersOf(uri), "A follows the URI for a refused caller")
	}

	cs, updated := connect(goodToken)
	require.NoError(t, cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri}))
	untilSubscribers(t, a, uri, 1) // B's stream
	require.NoError(t, k.Updated())
	assert.Equal(t, uri, heard(t, updated))
}

// A subscription through B to a URI A serves is dropped by B once the
// caller's principal has expired, by B's own clock: the next update of
// A's does not reach it, and a caller whose principal does not expire
// still hears. B cannot run A's plan, so it drops an expired caller's
// subscriptions to A's public resources too (the marker here).
func TestFleetSubscriptionExpires(t *testing.T) {
	const uri, marker = "test://secret", "test://marker"
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		goodToken:     bindsec.NewPrincipal("alice", "reader"),
		"short-token": bindsec.NewPrincipal("sam", "reader").WithExpires(time.Now().Add(time.Hour)),
	})
	a, b := newReplicaOf(t, catalog.Config{Authenticator: auth}), newReplicaOf(t, catalog.Config{Authenticator: auth})
	read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: "x"}, nil }
	k, err := a.cat.StartResource(context.Background(), catalog.Resource{URI: uri}, bindsec.Plan{Roles: []string{"reader"}}, read)
	require.NoError(t, err)
	m, err := a.cat.StartResource(context.Background(), catalog.Resource{URI: marker}, bindsec.Plan{Public: true}, read)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(context.Background()); _ = m.Stop(context.Background()) })
	b.peers.set("resource", uri, a.fleet)
	b.peers.set("resource", marker, a.fleet)

	connect := func(token string) chan string {
		updated := make(chan string, 64)
		cl := mcp.NewClient(&mcp.Implementation{Name: "fleet-expiry", Version: "1"}, &mcp.ClientOptions{
			Logger: quietLogger(),
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				updated <- r.Params.URI
			},
		})
		cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
			Endpoint: b.url, HTTPClient: bearerClient(token), MaxRetries: -1}, sessionful)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		require.NoError(t, cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: uri}))
		require.NoError(t, cs.Subscribe(ctxGuard(t), &mcp.SubscribeParams{URI: marker}))
		return updated
	}
	short, good := connect("short-token"), connect(goodToken)
	require.NoError(t, k.Updated())
	assert.Equal(t, uri, heard(t, short))
	assert.Equal(t, uri, heard(t, good))

	mcpserve.SetSubscriptionClock(b.srv, func() time.Time { return time.Now().Add(2 * time.Hour) })
	require.NoError(t, k.Updated())
	assert.Equal(t, uri, heard(t, good))
	// Dropped before the update went out: the table held both until then.
	assert.Equal(t, 1, b.srv.SubscribersOf(uri), "B still follows the URI for the expired caller")
	require.NoError(t, m.Updated())
	assert.Equal(t, marker, heard(t, good))
	assert.Empty(t, short, "the expired caller heard an update")
}
