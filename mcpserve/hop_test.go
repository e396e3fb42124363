package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// peerServer serves h on a loopback listener that counts the connections
// it accepts; it is closed when the test ends.
func peerServer(t testing.TB, h http.Handler) (string, *atomic.Int64) {
	t.Helper()
	n := &atomic.Int64{}
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = countingListener{ts.Listener, n}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL, n
}

// calling reports whether r is a fleet request for the tools/call or
// resources/read of name.
func calling(r *http.Request, name string) bool {
	m := r.Header.Get("Mcp-Method")
	return (m == "tools/call" || m == "resources/read") && r.Header.Get("Mcp-Name") == name
}

// callWithin calls tool name on c, within limit, and returns the result,
// how long it took, and the error.
func callWithin(t *testing.T, c *mcp.ClientSession, name string, limit time.Duration) (*mcp.CallToolResult, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t0 := time.Now()
	res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	return res, time.Since(t0), err
}

func wantUnavailable(t *testing.T, err error, retryable bool) {
	t.Helper()
	if d := rpcData(err); rpcCode(err) != mcpserve.CodePeerUnavailable || d["reason"] != "peer_unavailable" || d["retryable"] != retryable {
		t.Fatalf("forward: %v (data %v); want CodePeerUnavailable, retryable %v", err, d, retryable)
	}
}

// A peer that answers a redirect gets no second request, and the
// redirect's target gets nothing at all: not the fleet's credential, not
// the caller's. The call fails as one to a peer that cannot be reached.
func TestForwardFollowsNoRedirect(t *testing.T) {
	a, b := newReplica(t), newReplica(t, behindProxy)
	startText(t, b.cat, context.Background(), "far", "here")
	var stolen atomic.Int64
	target, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		t.Errorf("the redirect's target got a request, Authorization %q, caller %q", r.Header.Get("Authorization"), r.Header.Get("Livereg-Fleet-Caller"))
	}))
	var calls atomic.Int64
	var self string
	peer, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case calling(r, "to-self"):
			// Back to where it came from: a client that followed would
			// send the call again.
			calls.Add(1)
			http.Redirect(w, r, self, http.StatusTemporaryRedirect)
		case calling(r, "to-other"):
			calls.Add(1)
			http.Redirect(w, r, target+"/steal", http.StatusTemporaryRedirect)
		default:
			b.srv.FleetHandler().ServeHTTP(w, r)
		}
	}))
	self = peer + "/fleet"
	a.peers.set("tool", "far", self)
	a.peers.set("tool", "to-self", self)
	a.peers.set("tool", "to-other", self)
	c := connectTo(t, a.url, goodToken)
	if res, _, err := callWithin(t, c, "far", hangGuard); err != nil || text(t, res) != "here" {
		t.Fatalf("forward through the peer: %v, %v", res, err)
	}
	for i, name := range []string{"to-self", "to-other"} {
		_, _, err := callWithin(t, c, name, hangGuard)
		// The request reached the peer: it may have run the body.
		wantUnavailable(t, err, false)
		if n := calls.Load(); n != int64(i+1) {
			t.Fatalf("%s: the peer got the call %d times; want once", name, n)
		}
	}
	// A peer that redirects every request: its first is the call
	// itself, which reached it.
	redirecting, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"/steal", http.StatusPermanentRedirect)
	}))
	a.peers.set("tool", "redirected", redirecting+"/fleet")
	_, _, err := callWithin(t, c, "redirected", hangGuard)
	wantUnavailable(t, err, false)
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// bigAnswer answers the tools/call or resources/read in r with a text of
// size bytes, as an event stream or as JSON, written from one small buffer
// so that the peer itself allocates next to nothing.
func bigAnswer(w http.ResponseWriter, r *http.Request, size int, stream bool) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
	tail := `"}]}}`
	if req.Method == "resources/read" {
		head = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"contents":[{"uri":"big://doc","text":"`, req.ID)
		tail = `"}]}}`
	}
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
		head, tail = "event: message\ndata: "+head, tail+"\n\n"
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	chunk := []byte(strings.Repeat("x", 32<<10))
	if _, err := w.Write([]byte(head)); err != nil {
		return
	}
	for n := 0; n < size; n += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return // the forwarder stopped reading
		}
	}
	_, _ = w.Write([]byte(tail))
}

// A forwarded result past MaxResultBytes is refused on the forwarding
// replica with the error a local one gets, and only about the limit of it
// is ever read: a 40 MiB answer costs the replica a few MiB, whether the
// peer streams it or sends it as one JSON body.
func TestForwardedResultOverTheLimit(t *testing.T) {
	const limit = 1 << 20
	const payload = 40 << 20
	a, b := newReplica(t, func(o *mcpserve.Options) { o.MaxResultBytes = limit }), newReplica(t, behindProxy)
	startText(t, a.cat, context.Background(), "local-big", strings.Repeat("y", limit+1))
	startText(t, b.cat, context.Background(), "far", "here")
	// Past the limit, but within what a hop reads: counted as a local
	// result is.
	startText(t, b.cat, context.Background(), "far-big", strings.Repeat("z", limit+1))
	stream := true
	peer, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calling(r, "huge") || calling(r, "big://doc") {
			bigAnswer(w, r, payload, stream)
			return
		}
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	for _, name := range []string{"far", "far-big", "huge"} {
		a.peers.set("tool", name, peer+"/fleet")
	}
	a.peers.set("resource", "big://doc", peer+"/fleet")
	c := connectTo(t, a.url, "")

	local, _, err := callWithin(t, c, "local-big", hangGuard)
	if err != nil || !local.IsError {
		t.Fatalf("local oversized result: %v, %v", local, err)
	}
	suffix := fmt.Sprintf("exceeds this server's limit of %d bytes", limit)
	if got := text(t, local); got != fmt.Sprintf(`tool "local-big": its result of %d bytes %s`, limit+1, suffix) {
		t.Fatalf("local oversized result says %q", got)
	}
	res, _, err := callWithin(t, c, "far-big", hangGuard)
	if err != nil || !res.IsError || text(t, res) != fmt.Sprintf(`tool "far-big": its result of %d bytes %s`, limit+1, suffix) {
		t.Fatalf("forwarded result just past the limit: %v, %v; want the local error", res, err)
	}
	for _, stream = range []bool{true, false} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, _, err := callWithin(t, c, "huge", hangGuard)
		runtime.ReadMemStats(&after)
		if err != nil || !res.IsError || !strings.HasPrefix(text(t, res), `tool "huge": its result of more than `) || !strings.HasSuffix(text(t, res), suffix) {
			t.Fatalf("stream %v: forwarded result of %d bytes: %v, %v; want the oversized-result error", stream, payload, res, err)
		}
		// Everything the process allocated during the call, both replicas
		// and the client included: a bound on its high-water mark.
		grew := after.TotalAlloc - before.TotalAlloc
		t.Logf("stream %v: a refused %d MiB result: %d KiB allocated", stream, payload>>20, grew>>10)
		if grew > 16<<20 {
			t.Fatalf("stream %v: a refused %d MiB result cost %d MiB of allocations; want a few", stream, payload>>20, grew>>20)
		}
		_, err = c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "big://doc"})
		if rpcCode(err) != -32603 || !strings.Contains(err.Error(), `resource "big://doc": its contents of more than `) {
			t.Fatalf("stream %v: forwarded read past the limit: %v", stream, err)
		}
	}
	// The refusals failed those calls alone: the peer's session serves on.
	if res, _, err := callWithin(t, c, "far", hangGuard); err != nil || text(t, res) != "here" {
		t.Fatalf("forward after the refusals: %v, %v", res, err)
	}
	if n := mcpserve.PeerSessions(a.srv); n != 1 {
		t.Fatalf("%d peer sessions; want the one kept", n)
	}
}

// Two stateless replicas whose views place a route on the public
// endpoint of one of them (a replica advertised it by mistake): the call
// ends at once, as one to a peer that cannot be reached, after one hop
// and a handful of connections, not a recursion.
func TestForwardToAPublicEndpointEnds(t *testing.T) {
	stateless := func(o *mcpserve.Options) { o.Stateless = true }
	a, b := newReplica(t, stateless), newReplica(t, stateless)
	a.peers.set("tool", "ghost", b.url)
	b.peers.set("tool", "ghost", b.url)
	c := connectTo(t, a.url, "") // anonymous: no caller header to tell by
	_, took, err := callWithin(t, c, "ghost", 3*time.Second)
	// Refused by b's public endpoint: an answer that is not a holder's,
	// which this side cannot tell from one that ran the call.
	wantUnavailable(t, err, false)
	if took > 2*time.Second {
		t.Fatalf("the call took %v", took)
	}
	if na, nb := a.accepted.Load(), b.accepted.Load(); na > 2 || nb > 2 {
		t.Fatalf("connections accepted: %d by a, %d by b; want a couple each", na, nb)
	}
	// The public endpoint refuses whatever a forwarder marks.
	for _, h := range []string{"Livereg-Fleet-Hop", "Livereg-Fleet-Caller"} {
		req := rawCall(t, b.url, "ghost")
		req.Header.Set(h, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 512)
		n, _ := resp.Body.Read(body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body[:n]), "forwarded by a fleet replica") {
			t.Fatalf("%s on the public endpoint: %d %q; want 400", h, resp.StatusCode, body[:n])
		}
	}
}

// Only the fleet handler marks a call as forwarded: a client that sends
// the mark to the public endpoint is served as any client, so an unknown
// tool is unknown, not gone, and its credential is its bearer token.
func TestPublicEndpointIgnoresAForgedForwardedMark(t *testing.T) {
	b := newReplica(t, func(o *mcpserve.Options) { o.Stateless = true })
	req := rawCall(t, b.url, "nothing")
	req.Header.Set(mcpserve.ForwardedMark, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(body), "unknown tool") || strings.Contains(string(body), "route_gone") {
		t.Fatalf("a call with a forged forwarded mark: %d %s; want unknown tool", resp.StatusCode, body)
	}
}

// The fleet handler serves one hop: a request forwarded again, or with a
// malformed hop count, never reaches the catalog.
func TestFleetHandlerRefusesAHopTooMany(t *testing.T) {
	b := newReplica(t)
	var runs atomic.Int64
	startGuarded(t, b.cat, &runs)
	for _, tc := range []struct {
		hops   []string
		status int
	}{
		{nil, http.StatusOK}, // a client of the fleet's own, which signs no count
		{[]string{"0"}, http.StatusBadRequest},
		{[]string{"one"}, http.StatusBadRequest},
		{[]string{"1", "1"}, http.StatusBadRequest},
		{[]string{"2"}, http.StatusLoopDetected},
		{[]string{"1"}, http.StatusOK},
	} {
		req := rawCall(t, b.fleet, "guarded")
		for _, h := range tc.hops {
			req.Header.Add("Livereg-Fleet-Hop", h)
		}
		resp, err := http.DefaultClient.Do(signed(t, req, b.fleet, nil))
		if err != nil {
			t.Fatal(err)
		}
		// The response begins before the body runs: read it to its end.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("hops %q: status %d, want %d", tc.hops, resp.StatusCode, tc.status)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the body ran %d times; want twice, for the requests of one hop", n)
	}
}

// A replica never forwards to its own advertised endpoint, however the
// view spells it: the route is not here, so it is gone.
func TestForwardNeverToItself(t *testing.T) {
	a := newReplica(t)
	var hits atomic.Int64
	countHits(t, a.srv, &hits)
	c := connectTo(t, a.url, "")
	for i, ep := range []string{a.fleet, strings.Replace(strings.ToUpper(a.fleet), "/FLEET", "/fleet", 1)} {
		name := fmt.Sprintf("mine-%d", i)
		a.peers.set("tool", name, ep)
		_, _, err := callWithin(t, c, name, hangGuard)
		if d := rpcData(err); rpcCode(err) != -32602 || d["reason"] != "route_gone" {
			t.Fatalf("%s: call for a route placed here: %v (data %v); want route_gone", ep, err, d)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the replica forwarded %d calls to itself", n)
	}
	if n := mcpserve.PeerSessions(a.srv); n != 0 {
		t.Fatalf("%d peer sessions; want none", n)
	}
}

// A route body that runs longer than ForwardTimeout is waited for: its
// holder begins the response when it dispatches the call, on its fast
// path and on the SDK's.
func TestForwardWaitsForASlowBody(t *testing.T) {
	for _, holderFast := range []bool{true, false} {
		t.Run(fmt.Sprintf("holder fast path %v", holderFast), func(t *testing.T) {
			const bound = 300 * time.Millisecond
			a, b := newReplica(t, forwardTimeout(bound)), newReplica(t)
			if !holderFast {
				mcpserve.NoFastPath(b.srv)
			}
			k, err := b.cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
				func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
					select {
					case <-time.After(3 * bound):
						return catalog.TextResult("done"), nil
					case <-ctx.Done():
						return catalog.Result{}, ctx.Err()
					}
				})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Stop(context.Background()) })
			a.peers.set("tool", "slow", b.fleet)
			c := connectTo(t, a.url, "")
			if res, _, err := callWithin(t, c, "slow", 10*bound); err != nil || text(t, res) != "done" {
				t.Fatalf("forwarded call of a body slower than the forward timeout: %v, %v", res, err)
			}
		})
	}
}

func forwardTimeout(d time.Duration) func(*mcpserve.Options) {
	return func(o *mcpserve.Options) { o.Fleet.ForwardTimeout = d }
}

// A peer that stops answering (frozen, as by SIGSTOP) after its session
// opened gives CodePeerUnavailable within ForwardTimeout, not retryable:
// the call may have reached it. Calls beyond the connection cap wait
// within the same bound, and open no connection past it.
func TestForwardToAFrozenPeer(t *testing.T) {
	const bound = 300 * time.Millisecond
	const cap = 2
	a := newReplica(t, forwardTimeout(bound), func(o *mcpserve.Options) { o.Fleet.MaxConnsPerPeer = cap })
	b := newReplica(t, behindProxy)
	startText(t, b.cat, context.Background(), "far", "here")
	var frozen atomic.Bool
	thaw := make(chan struct{})
	peer, accepted := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if frozen.Load() {
			select {
			case <-thaw:
			case <-r.Context().Done():
			}
			return
		}
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(thaw) }) // before the peer's server closes
	a.peers.set("tool", "far", peer+"/fleet")
	c := connectTo(t, a.url, "")
	if res, _, err := callWithin(t, c, "far", hangGuard); err != nil || text(t, res) != "here" {
		t.Fatalf("forward before the freeze: %v, %v", res, err)
	}
	frozen.Store(true)
	const callers = cap + 3
	errs := make(chan error, callers)
	took := make(chan time.Duration, callers)
	for range callers {
		go func() {
			_, d, err := callWithin(t, c, "far", 10*bound)
			errs <- err
			took <- d
		}()
	}
	// Before the bound passes, the calls past the cap wait for a
	// connection instead of opening one. (After it, the connections of
	// the calls that gave up close, and the waiting ones may open
	// theirs.)
	time.Sleep(bound / 2)
	if n := accepted.Load(); n > cap {
		t.Fatalf("the peer accepted %d connections; the cap is %d", n, cap)
	}
	for range callers {
		wantUnavailable(t, <-errs, false)
		if d := <-took; d > bound+time.Second {
			t.Fatalf("a call to a frozen peer took %v; want about %v", d, bound)
		}
	}
}

// behindProxy is the option of a replica that a test reaches through a
// proxy of its own, at a URL the replica does not advertise: it checks
// no endpoint that requests are signed for.
func behindProxy(o *mcpserve.Options) { o.Fleet.Advertise = "" }

func TestFleetHopOptions(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	for _, f := range []*mcpserve.Fleet{
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, ForwardTimeout: -time.Second},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, Advertise: "127.0.0.1:8931/fleet"},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, Advertise: "ftp://h/fleet"},
		{Peers: &peerMap{}, Identity: fleetIdentity(t), Token: fleetToken, Advertise: "http:///fleet"},
	} {
		if _, err := mcpserve.New(cat, mcpserve.Options{Path: "/mcp", Fleet: f}); !errors.Is(err, mcpserve.ErrInvalidOptions) {
			t.Errorf("Fleet %+v: %v; want ErrInvalidOptions", f, err)
		}
	}
}

// A forward to a peer that accepts TCP and never answers fails within
// ForwardTimeout, not retryable (the call reached it); the peer is not
// kept, and nothing is left running. One that begins its answer and then
// stalls is a slow body, which the caller's context bounds, not the hop.
func TestForwardAnswerIsBounded(t *testing.T) {
	// Cleanups run last registered first: the client, the peers, the
	// replica, and then the check that nothing is left.
	leftOver := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leftOver) })
	const bound = 300 * time.Millisecond
	a := newReplica(t, forwardTimeout(bound))

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, conn) // read once accepting is closed
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		<-accepting
		for _, conn := range held {
			_ = conn.Close()
		}
	})
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stalled.Close)
	t.Cleanup(func() { close(release) })
	a.peers.set("tool", "silent", "http://"+silent.Addr().String()+"/fleet")
	a.peers.set("tool", "stalled", stalled.URL+"/fleet")

	c := connectTo(t, a.url, "")
	_, took, err := callWithin(t, c, "silent", 10*bound)
	wantUnavailable(t, err, false)
	if took > bound+time.Second {
		t.Fatalf("the forward took %v; want about %v", took, bound)
	}
	if n := mcpserve.PeerSessions(a.srv); n != 0 {
		t.Fatalf("%d peers kept after the forward failed", n)
	}
	_, took, err = callWithin(t, c, "stalled", 3*bound)
	if !errors.Is(err, context.DeadlineExceeded) || took < 3*bound {
		t.Fatalf("a stalled answer: %v after %v; want the caller's own deadline, %v", err, took, 3*bound)
	}
}

// A holder that sends its response and never ends the stream costs the
// caller at most ForwardTimeout: the forward has its answer, and waits
// that long for the end that frees the connection, then drops it.
func TestForwardUnendedAnswerIsBounded(t *testing.T) {
	leftOver := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leftOver) })
	const bound = 300 * time.Millisecond
	a := newReplica(t, forwardTimeout(bound))
	release := make(chan struct{})
	unended := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"here\"}]}}\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(unended.Close)
	t.Cleanup(func() { close(release) })
	a.peers.set("tool", "unended", unended.URL+"/fleet")
	c := connectTo(t, a.url, "")
	res, took, err := callWithin(t, c, "unended", 20*bound)
	if err != nil || text(t, res) != "here" {
		t.Fatalf("a forward whose answer never ends: %v, %v; want its result", res, err)
	}
	if took < bound || took > bound+time.Second {
		t.Fatalf("the forward took %v; want about %v", took, bound)
	}
}

// A peer that drops the connection before it begins its answer (it died,
// or closed the connection) has not run the body, which a holder starts
// only after it began the answer: the call may be retried. One that
// drops it after it began may have run the body: it may not.
func TestForwardToAPeerThatDies(t *testing.T) {
	a, b := newReplica(t), newReplica(t, behindProxy)
	startText(t, b.cat, context.Background(), "far", "here")
	peer, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case calling(r, "dropped"):
			panic(http.ErrAbortHandler) // the connection closes, unanswered
		case calling(r, "died"):
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	for _, name := range []string{"far", "dropped", "died"} {
		a.peers.set("tool", name, peer+"/fleet")
	}
	c := connectTo(t, a.url, "")
	for _, tc := range []struct {
		name      string
		retryable bool
	}{{"dropped", true}, {"died", false}} {
		// A session open first, so that the call itself is what fails.
		if res, _, err := callWithin(t, c, "far", hangGuard); err != nil || text(t, res) != "here" {
			t.Fatalf("forward: %v, %v", res, err)
		}
		_, _, err := callWithin(t, c, tc.name, hangGuard)
		wantUnavailable(t, err, tc.retryable)
	}
}
