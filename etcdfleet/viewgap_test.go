package etcdfleet_test

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// keyrings returns, for each name, a static Identity that signs as it and
// verifies every other name's signature.
func keyrings(t *testing.T, names ...string) map[string]mcpserve.Identity {
	t.Helper()
	pubs := map[string]ed25519.PublicKey{}
	privs := map[string]ed25519.PrivateKey{}
	for _, n := range names {
		pub, priv, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		pubs[n], privs[n] = pub, priv
	}
	ids := map[string]mcpserve.Identity{}
	for _, n := range names {
		k, err := mcpserve.NewKeyring(n, privs[n], pubs)
		require.NoError(t, err)
		ids[n] = k
	}
	return ids
}

// newSigned is newServed with id signing the replica's hop requests.
func newSigned(t *testing.T, ep, name string, id mcpserve.Identity) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	r := newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second,
		Replica: name, Advertise: base + mcpserve.DefaultFleetPath}))
	srv, err := mcpserve.New(r.cat, mcpserve.Options{Logger: slog.New(slog.DiscardHandler), Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: r.Replica, Identity: id, Token: fleetToken, Advertise: base + mcpserve.DefaultFleetPath}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{replica: r, srv: srv, url: base + "/mcp", stop: cancel, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(s.shut)
	return s
}

// The fleet smoke's forward_answer flake, made deterministic. A name's
// consumer on a stops, and a successor claims the name on a again, while
// v's follower lags: v's view still holds the predecessor's record, and
// so locates the name on a, though a successor lives there. The follower
// then applies the release alone: for as long as the successor's claim
// is not applied, v's view holds no record of the name, and a call
// through v is answered "unknown tool", although the successor's start
// returned before the call began and v locates a both before and after
// the call. The view is right for its revision; what tells the two
// records apart is their owner, which is how the fleet checker
// (cmd/internal/loadgen/fleet) judges that v located this consumer.
func TestForwardThroughAViewBetweenClaims(t *testing.T) {
	ep := startEtcd(t)
	ids := keyrings(t, "a", "v")
	a, v := newSigned(t, ep, "a", ids["a"]), newSigned(t, ep, "v", ids["v"])
	ctx, life := ctxFor(t), lifeFor(t)
	cs := v.client(t)
	key := toolKey("n")

	pred := a.startSays(t, life, "n")
	waitListed(t, v.cat, "a's tool listed on v", func() bool { return listed(v.cat, "n") })
	aEndpoint := strings.TrimSuffix(a.url, "/mcp") + mcpserve.DefaultFleetPath

	// v's follower stops before each watch response that touches the
	// name's key, until the test lets it go on.
	held, goOn, disarm := make(chan []string), make(chan struct{}), make(chan struct{})
	v.SetBeforeApply(func(keys []string) {
		if !slices.Contains(keys, key) {
			return
		}
		select {
		case held <- keys:
		case <-disarm:
			return
		}
		select {
		case <-goOn:
		case <-disarm:
		}
	})
	t.Cleanup(func() { close(disarm) }) // before the replicas close

	require.NoError(t, pred.Stop(ctx)) // the release: its key deleted
	require.Equal(t, []string{key}, <-held, "the follower holds the release alone")
	succ := a.startSays(t, life, "n")

	// Before the call: v locates a, by the predecessor's record.
	ep, ok := v.Peer(catalog.KindTool, "n")
	require.True(t, ok)
	require.Equal(t, aEndpoint, ep)
	rec, ok := v.View().Holder(key)
	require.True(t, ok)
	require.Equal(t, pred.Owner().ID(), rec.Owner, "v's view holds the predecessor's record")
	require.NotEqual(t, succ.Owner().ID(), rec.Owner)

	// The gap: the release applied, the successor's claim not yet.
	goOn <- struct{}{}
	require.Equal(t, []string{key}, <-held, "the successor's claim comes in a response of its own")
	_, ok = v.Peer(catalog.KindTool, "n")
	require.False(t, ok, "v's view between the release and the successor's claim")
	_, err := callText(ctx, cs, "n")
	code, data := wireData(err)
	require.Equal(t, int64(-32602), code, "%v", err)
	require.Contains(t, err.Error(), "unknown tool")
	require.NotContains(t, data, "route_gone")
	select {
	case <-succ.Done():
		t.Fatal("the successor died")
	default:
	}

	// After: v locates a again, by the successor's record, and the call
	// reaches the successor.
	goOn <- struct{}{}
	for {
		changed := v.View().Changes()
		if rec, ok := v.View().Holder(key); ok && rec.Owner == succ.Owner().ID() {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("v's view never applied the successor's claim")
		}
	}
	ep, ok = v.Peer(catalog.KindTool, "n")
	require.True(t, ok)
	require.Equal(t, aEndpoint, ep)
	got, err := callText(ctx, cs, "n")
	require.NoError(t, err)
	require.Equal(t, "ran on a", got)
}
