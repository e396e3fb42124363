package mcpserve_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

const fleetToken = "fleet-token-0123456789abcdef"

// peerMap is a Peers that a test fills by hand: kind/name -> endpoint.
// package etcdfleet's Replica is the real one; its tests run these paths
// over a real etcd.
type peerMap struct{ m sync.Map }

func (p *peerMap) Peer(kind catalog.Kind, name string) (string, bool) {
	v, ok := p.m.Load(string(kind) + "/" + name)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func (p *peerMap) set(kind, name, endpoint string) { p.m.Store(kind+"/"+name, endpoint) }

// replica is one fleet member: a catalog (with the static tokens of
// newGuarded), its Server with Fleet set (advertising its own fleet
// endpoint), served on a loopback listener that counts the connections it
// accepts.
type replica struct {
	cat      *catalog.Catalog
	srv      *mcpserve.Server
	peers    *peerMap
	url      string // the public endpoint
	fleet    string // the fleet endpoint
	accepted *atomic.Int64
	served   chan error
	stop     context.CancelFunc
}

var fleetAuth = bindsec.NewStaticTokens(map[string]bindsec.Principal{
	goodToken:   bindsec.NewPrincipal("alice", "reader"),
	noRoleToken: bindsec.NewPrincipal("bob"),
})

// newReplica starts a replica; tune, if given, changes its options.
func newReplica(t testing.TB, tune ...func(*mcpserve.Options)) *replica {
	t.Helper()
	return newReplicaOf(t, catalog.Config{Authenticator: fleetAuth}, tune...)
}

// newReplicaOf starts a replica whose catalog has cfg.
func newReplicaOf(t testing.TB, cfg catalog.Config, tune ...func(*mcpserve.Options)) *replica {
	t.Helper()
	r := &replica{peers: &peerMap{}, served: make(chan error, 1), accepted: &atomic.Int64{}}
	r.cat = newCatalog(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String() + "/mcp"
	r.fleet = "http://" + ln.Addr().String() + mcpserve.DefaultFleetPath
	opts := mcpserve.Options{
		Logger: quietLogger(),
		Path:   "/mcp",
		Fleet:  &mcpserve.Fleet{Peers: r.peers, Identity: fleetIdentity(t), Token: fleetToken, Advertise: r.fleet},
	}
	for _, f := range tune {
		f(&opts)
	}
	srv, err := mcpserve.New(r.cat, opts)
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	r.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.served <- srv.Serve(ctx, countingListener{ln, r.accepted}) }()
	t.Cleanup(r.shut)
	return r
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// shut stops serving and closes the server, once.
func (r *replica) shut() {
	if r.stop == nil {
		return
	}
	r.stop()
	r.stop = nil
	<-r.served
	_ = r.srv.Close()
}

// connectTo connects a streamable HTTP client to url with token.
func connectTo(t testing.TB, url, token string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: bearerClient(token), MaxRetries: -1, DisableStandaloneSSE: true,
	}, sessionful)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startGuarded starts, on cat, a tool and a resource that need role
// "reader", whose bodies count their runs and say who called.
func startGuarded(t *testing.T, cat *catalog.Catalog, runs *atomic.Int64) (*catalog.Consumer, *catalog.Consumer) {
	t.Helper()
	plan := bindsec.Plan{Roles: []string{"reader"}}
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "guarded"}, plan,
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			runs.Add(1)
			return catalog.TextResult("hello " + c.Principal.Subject()), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	r, err := cat.StartResource(context.Background(), catalog.Resource{URI: "secret://doc", Name: "doc"}, plan,
		func(_ context.Context, rd catalog.Read) (catalog.Contents, error) {
			runs.Add(1)
			return catalog.Contents{Text: "classified for " + rd.Principal.Subject()}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return k, r
}

// A call on A for a route B holds runs on B, under B's owner's plan, with
// the caller's credential: the role the caller's token carries decides,
// as it would on B.
func TestForwardCarriesTheCallersCredential(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	var runs atomic.Int64
	startGuarded(t, b.cat, &runs)
	a.peers.set("tool", "guarded", b.fleet)
	a.peers.set("resource", "secret://doc", b.fleet)

	good := connectTo(t, a.url, goodToken)
	res, err := good.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{}})
	if err != nil || res.IsError || text(t, res) != "hello alice" {
		t.Fatalf("forwarded call with a reader's token = %+v, %v; want hello alice", res, err)
	}
	rr, err := good.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "classified for alice" {
		t.Fatalf("forwarded read = %+v, %v", rr, err)
	}
	// The results are as a local call's: nothing of the hop's protocol
	// (the holder's serverInfo) reaches a 2025-11-25 session.
	if res.Meta[mcp.MetaKeyServerInfo] != nil || rr.Meta[mcp.MetaKeyServerInfo] != nil {
		t.Fatalf("forwarded results carry the hop's metadata: %v, %v", res.Meta, rr.Meta)
	}
	if runs.Load() != 2 {
		t.Fatalf("bodies ran %d times, want 2", runs.Load())
	}

	// The fleet credential does not stand in for the caller's: without a
	// role, or without a token, B's plan refuses and the body never runs.
	for _, token := range []string{noRoleToken, ""} {
		c := connectTo(t, a.url, token)
		res, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.Contains(text(t, res), "access denied") {
			t.Fatalf("token %q: forwarded call = %+v, %v; want a denial", token, res, err)
		}
		if _, err := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"}); rpcCode(err) != mcpserve.CodeDenied {
			t.Fatalf("token %q: forwarded read: %v; want CodeDenied", token, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("a refused body ran: %d runs, want 2", runs.Load())
	}
}

// A consumer that died between A's lookup and B's dispatch gives the
// route_gone error a local death gives, not "unknown tool"; its body never
// runs.
func TestForwardToAGoneRouteIsRouteGone(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	var runs atomic.Int64
	k, r := startGuarded(t, b.cat, &runs)
	a.peers.set("tool", "guarded", b.fleet)
	a.peers.set("resource", "secret://doc", b.fleet)
	// A's view still says B holds them: the deaths have not reached it.
	_ = k.Stop(context.Background())
	_ = r.Stop(context.Background())

	c := connectTo(t, a.url, goodToken)
	_, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{}})
	if d := rpcData(err); rpcCode(err) != -32602 || d["reason"] != "route_gone" || d["retryable"] != true {
		t.Fatalf("call for a route gone on its replica: %v (data %v); want -32602 route_gone", err, d)
	}
	_, err = c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
	if d := rpcData(err); rpcCode(err) != -32602 || d["reason"] != "route_gone" {
		t.Fatalf("read for a route gone on its replica: %v (data %v); want -32602 route_gone", err, d)
	}
	if runs.Load() != 0 {
		t.Fatalf("a dead owner's body ran %d times", runs.Load())
	}
	// A route nobody's view places anywhere is still plainly unknown.
	if _, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "nowhere"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("call for a route held nowhere: %v; want unknown tool", err)
	}
}

// Views that disagree cannot make a call loop: A forwards to B, whose
// view says A holds the route; B serves forwarded calls locally only, so
// the call ends on B, as route_gone, after exactly one hop.
func TestForwardNeverLoops(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	a.peers.set("tool", "ghost", b.fleet)
	b.peers.set("tool", "ghost", a.fleet)
	var hits atomic.Int64
	countHits(t, a.srv, &hits)
	countHits(t, b.srv, &hits)

	c := connectTo(t, a.url, goodToken)
	_, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "ghost", Arguments: map[string]any{}})
	if d := rpcData(err); rpcCode(err) != -32602 || d["reason"] != "route_gone" {
		t.Fatalf("call for a route the views bounce: %v; want route_gone", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the call was forwarded %d times; want exactly one hop", n)
	}
}

// countHits counts the tools/call requests forwarded to srv.
func countHits(t *testing.T, srv *mcpserve.Server, hits *atomic.Int64) {
	t.Helper()
	mcpserve.OnForwarded(srv, func(method string) {
		if method == "tools/call" {
			hits.Add(1)
		}
	})
}

// rawCall is a stateless (2026-07-28) tools/call POST to url.
func rawCall(t testing.TB, url, tool string) *http.Request {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	return req
}

// A replica that cannot be reached gives a retryable CodePeerUnavailable
// at once: not "unknown tool", and no hang.
func TestForwardToADownPeerIsRetryable(t *testing.T) {
	a := newReplica(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/fleet"
	_ = ln.Close() // nothing listens there now
	a.peers.set("tool", "far", down)
	c := connectTo(t, a.url, goodToken)
	for range 2 { // the second finds no session cached from the first
		_, err = c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "far", Arguments: map[string]any{}})
		if d := rpcData(err); rpcCode(err) != mcpserve.CodePeerUnavailable || d["reason"] != "peer_unavailable" || d["retryable"] != true {
			t.Fatalf("call for a route on a down replica: %v (data %v); want retryable CodePeerUnavailable", err, d)
		}
	}
}

// A peer that served calls and then went away: the calls after get
// CodePeerUnavailable, and its session is forgotten, not kept for an
// endpoint that may never come back.
func TestForwardForgetsAFailedPeer(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	startText(t, b.cat, context.Background(), "far", "here")
	a.peers.set("tool", "far", b.fleet)
	c := connectTo(t, a.url, "")
	if res, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "far", Arguments: map[string]any{}}); err != nil || text(t, res) != "here" {
		t.Fatalf("forwarded call: %v, %v", res, err)
	}
	if n := mcpserve.PeerSessions(a.srv); n != 1 {
		t.Fatalf("%d peer sessions after a forward; want 1", n)
	}
	b.shut()
	_, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "far", Arguments: map[string]any{}})
	if rpcCode(err) != mcpserve.CodePeerUnavailable {
		t.Fatalf("call for a route on a replica gone: %v; want CodePeerUnavailable", err)
	}
	if n := mcpserve.PeerSessions(a.srv); n != 0 {
		t.Fatalf("%d peer sessions held after the peer failed; want 0", n)
	}
}

// A forwarded call is bounded by the caller's context: a client that
// goes away ends the body's context on the replica that runs it, and both
// servers close without waiting for the body.
func TestForwardEndsWithTheCaller(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b := newReplica(t), newReplica(t)
	entered, ended := make(chan struct{}), make(chan error, 1)
	k, err := b.cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
			close(entered)
			<-ctx.Done()
			ended <- ctx.Err()
			return catalog.Result{}, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	a.peers.set("tool", "slow", b.fleet)
	c := connectTo(t, a.url, "")
	ctx, cancel := context.WithCancel(ctxGuard(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		done <- err
	}()
	wait(t, entered, "the body on B to start")
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("body's context ended with %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the body's context on B did not end with the caller's")
	}
	<-done
	_ = c.Close()
	_ = k.Stop(context.Background())
	a.shut()
	b.shut()
}

func TestFleetOptions(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for _, f := range []*mcpserve.Fleet{
		{Token: fleetToken},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: "short"},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, Path: "fleet"},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, Path: "/mcp"},
	} {
		if _, err := mcpserve.New(cat, mcpserve.Options{Path: "/mcp", Fleet: f}); !errors.Is(err, mcpserve.ErrInvalidOptions) {
			t.Errorf("Fleet %+v: %v; want ErrInvalidOptions", f, err)
		}
	}
	// Without a Fleet the handler exists and answers 404.
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := &statusRecorder{header: http.Header{}}
	srv.FleetHandler().ServeHTTP(rec, rawCall(t, "http://127.0.0.1/fleet", "x"))
	if rec.status != http.StatusNotFound {
		t.Fatalf("FleetHandler without a Fleet: %d, want 404", rec.status)
	}
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }
