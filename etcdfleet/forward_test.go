package etcdfleet_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

const fleetToken = "fleet-token-0123456789abcdef"

// served is a replica whose catalog is served over MCP with forwarding:
// its public endpoint, and the fleet endpoint it advertises in its claims.
type served struct {
	replica
	srv    *mcpserve.Server
	url    string
	stop   context.CancelFunc
	served chan error
}

// newServed joins the fleet at ep as name, advertising the fleet path of
// a loopback listener it then serves on.
func newServed(t *testing.T, ep, name string) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	r := newReplicaOf(t, joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second,
		Replica: name, Advertise: base + mcpserve.DefaultFleetPath}))
	srv, err := mcpserve.New(r.cat, mcpserve.Options{Logger: slog.New(slog.DiscardHandler), Path: "/mcp", Fleet: &mcpserve.Fleet{Peers: r.Replica, Token: fleetToken}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{replica: r, srv: srv, url: base + "/mcp", stop: cancel, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(s.shut)
	return s
}

// shut stops serving, as a crashed process stops answering.
func (s *served) shut() {
	if s.stop == nil {
		return
	}
	s.stop()
	s.stop = nil
	<-s.served
	_ = s.srv.Close()
}

func (s *served) client(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "fleet-test", Version: "1"}, nil)
	cs, err := cl.Connect(ctxFor(t), &mcp.StreamableClientTransport{Endpoint: s.url, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// startSays starts, on s, a public tool whose body says which replica ran
// it, and fails the test if it ever runs after its owner died.
func (s *served) startSays(t *testing.T, ctx context.Context, name string) *catalog.Consumer {
	t.Helper()
	var k *catalog.Consumer
	k, err := s.cat.StartTool(ctx, catalog.Tool{Name: name}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			select {
			case <-k.Done():
				t.Errorf("%s: the body ran after its owner died", name)
			default:
			}
			return catalog.TextResult("ran on " + s.Name()), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	s.keep(k)
	return k
}

func callText(ctx context.Context, cs *mcp.ClientSession, name string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		return "", errors.New("empty result")
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text, nil
	}
	return "", errors.New("not text")
}

func wireData(err error) (int64, string) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return 0, ""
	}
	return we.Code, string(we.Data)
}

// Three replicas serve one catalog: a client of replica a lists and calls
// the tool a consumer on replica c serves. When that consumer dies, a's
// answer is route_gone or unknown (once a's view has caught up), never a
// body run by a dead owner; when c crashes, a's answer is a retryable
// error, never "unknown tool" while c's claim stands, and the name is free
// again once c's lease expires.
func TestForwardAcrossTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a, _, c := newServed(t, ep, "a"), newServed(t, ep, "b"), newServed(t, ep, "c")
	ctx, life := ctxFor(t), lifeFor(t)
	cs := a.client(t)

	kctx, kill := context.WithCancel(life)
	far := c.startSays(t, kctx, "far")
	waitListed(t, a.cat, "c's tool listed on a", func() bool { return listed(a.cat, "far") })
	if got, err := callText(ctx, cs, "far"); err != nil || got != "ran on c" {
		t.Fatalf("call on a for c's tool: %q, %v; want \"ran on c\"", got, err)
	}

	// c's consumer dies: until a's view hears of it, a forwards and c
	// answers route_gone; after, a knows no such tool.
	kill()
	// A cancelled context kills its owner a moment later, not at once:
	// until then a call may still run, by a live owner.
	select {
	case <-far.Done():
	case <-ctx.Done():
		t.Fatal("c's consumer did not die after its context was cancelled")
	}
	for listed(a.cat, "far") {
		_, err := callText(ctx, cs, "far")
		if code, data := wireData(err); code != -32602 || !strings.Contains(data, "route_gone") && !strings.Contains(err.Error(), "unknown tool") {
			t.Fatalf("call after the consumer died: %v (%s)", err, data)
		}
	}

	// c crashes: its claim stands until its lease expires. Meanwhile a's
	// forwards fail with CodePeerUnavailable, never "unknown tool". Each
	// is retryable, since c refuses the connection; except possibly the
	// first, if it went out on a pooled connection c had not yet been
	// seen to close: that request may have reached c, so nobody can say
	// whether the body ran.
	c.startSays(t, life, "doomed")
	waitListed(t, a.cat, "doomed listed on a", func() bool { return listed(a.cat, "doomed") })
	c.shut()
	c.Crash()
	var retryable, unsure int
	for calls := 0; ; calls++ {
		_, err := callText(ctx, cs, "doomed")
		code, data := wireData(err)
		if code == -32602 && strings.Contains(err.Error(), "unknown tool") && !listed(a.cat, "doomed") {
			break // c's lease expired, and a's view has heard
		}
		switch {
		case code == mcpserve.CodePeerUnavailable && strings.Contains(data, `"retryable":true`):
			retryable++
		case code == mcpserve.CodePeerUnavailable && calls == 0:
			unsure++
		default:
			t.Fatalf("call %d for a crashed replica's tool: %v (%s); want a retryable CodePeerUnavailable", calls, err, data)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if retryable == 0 {
		t.Fatalf("no retryable answer while the crashed replica's claim stood (%d unsure)", unsure)
	}
	waitListed(t, a.cat, "c's claim expired", func() bool { return !listed(a.cat, "doomed") })
	a.startSays(t, life, "doomed")
	if got, err := callText(ctx, cs, "doomed"); err != nil || got != "ran on a" {
		t.Fatalf("the successor on a: %q, %v", got, err)
	}
}

// Peer locates the routes other replicas hold, at the endpoint they
// advertise; never this replica's own, nor a holder that advertises none.
func TestPeerLocatesOtherReplicas(t *testing.T) {
	ep := startEtcd(t)
	a, b := newServed(t, ep, "a"), newServed(t, ep, "b")
	silent := newReplica(t, ep, "silent") // advertises no endpoint
	life := lifeFor(t)
	a.startSays(t, life, "on-a")
	b.startSays(t, life, "on-b")
	silent.mustStart(t, life, "on-silent")
	waitListed(t, a.cat, "every tool listed on a", func() bool {
		return listed(a.cat, "on-b") && listed(a.cat, "on-silent")
	})
	bEndpoint := strings.TrimSuffix(b.url, "/mcp") + mcpserve.DefaultFleetPath
	for _, tc := range []struct {
		kind catalog.Kind
		name string
		want string
		ok   bool
	}{
		{"tool", "on-b", bEndpoint, true},
		{"tool", "on-a", "", false},      // a's own
		{"tool", "on-silent", "", false}, // no endpoint advertised
		{"tool", "nowhere", "", false},
		{"resource", "on-b", "", false}, // another kind's name
		{"bogus", "on-b", "", false},
	} {
		if got, ok := a.Peer(tc.kind, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("Peer(%q, %q) = %q, %v; want %q, %v", tc.kind, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
