package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// forwarder sends calls to the replicas that hold their routes, through
// the SDK's own client over streamable HTTP, stateless (protocol
// 2026-07-28): one client session per peer endpoint, opened on first use
// and shared by every call to that peer, over one pool of keep-alive
// connections. A stateless session holds no state on the peer, so a peer
// that restarts needs no new one; a session that fails to open is
// forgotten, and the next call opens another.
//
// Each session's requests go through a fleetTransport of its own, which
// sends them to that peer's endpoint alone, never follows a redirect, and
// bounds the wait for a response to begin and the bytes read of it.
type forwarder struct {
	peers  Peers
	rt     http.RoundTripper // the pool every peer's requests share
	own    bool              // rt is the forwarder's own, closed with it
	jar    http.CookieJar    // from Fleet.HTTPClient
	whole  time.Duration     // Fleet.HTTPClient's Timeout
	token  string
	self   endpointKey // this replica's advertised endpoint
	isSelf bool        // self is set
	begin  time.Duration
	limit  int64 // of a response body, from MaxResultBytes
	client *mcp.Client
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	conns  map[string]*peerConn
}

// peerConn is one peer's session; ready is closed once the open attempt
// ended, with cs or err set.
type peerConn struct {
	ready chan struct{}
	cs    *mcp.ClientSession
	err   error
}

// errSelf: the route's endpoint is this replica's own advertised one.
var errSelf = errors.New("mcpserve: the route's endpoint is this replica's own")

// newForwarder makes the forwarder of a Server whose options passed
// startFleet's checks; maxResult is the Server's result limit.
func newForwarder(f *Fleet, maxResult int64, log *slog.Logger) *forwarder {
	fw := &forwarder{peers: f.Peers, token: f.Token, begin: cmpOr(f.ForwardTimeout, defaultForwardTimeout),
		limit: hopBodyLimit(maxResult), log: log, conns: map[string]*peerConn{}}
	if hc := f.HTTPClient; hc != nil {
		fw.rt, fw.jar, fw.whole = hc.Transport, hc.Jar, hc.Timeout
		if fw.rt == nil {
			fw.rt = http.DefaultTransport
		}
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		if n := cmpOr(f.MaxConnsPerPeer, defaultMaxConnsPerPeer); n > 0 {
			tr.MaxConnsPerHost = n
		}
		fw.rt, fw.own = tr, true
	}
	if f.Advertise != "" {
		fw.self, _ = parseEndpoint(f.Advertise) // startFleet checked it
		fw.isSelf = true
	}
	fw.client = mcp.NewClient(&mcp.Implementation{Name: "livereg-fleet", Version: defaultVersion}, &mcp.ClientOptions{Logger: log})
	return fw
}

// httpClient is the HTTP client of the session to the peer at ep.
func (f *forwarder) httpClient(ep endpointKey) *http.Client {
	return &http.Client{
		Transport:     &fleetTransport{base: f.rt, token: f.token, endpoint: ep, begin: f.begin, limit: f.limit},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
		Jar:           f.jar,
		Timeout:       f.whole,
	}
}

// session returns the client session to endpoint, opening it if need be,
// or errSelf for this replica's own endpoint. It waits at most until ctx
// ends; the open itself is bounded by Fleet.ForwardTimeout, not by ctx,
// so that one impatient caller does not fail the others waiting on the
// same peer.
func (f *forwarder) session(ctx context.Context, endpoint string) (*mcp.ClientSession, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ErrClosed
	}
	pc, ok := f.conns[endpoint]
	if !ok {
		ep, err := parseEndpoint(endpoint)
		switch {
		case err != nil:
			f.mu.Unlock()
			return nil, fmt.Errorf("peer endpoint %s: %w", quote.Name(endpoint), err)
		case f.isSelf && ep == f.self:
			f.mu.Unlock()
			return nil, errSelf
		}
		pc = &peerConn{ready: make(chan struct{})}
		f.conns[endpoint] = pc
		go f.open(endpoint, ep, pc)
	}
	f.mu.Unlock()
	select {
	case <-pc.ready:
		return pc.cs, pc.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// open opens the session to the peer at endpoint (one server/discover
// round trip), within Fleet.ForwardTimeout whatever the peer does.
func (f *forwarder) open(endpoint string, ep endpointKey, pc *peerConn) {
	defer close(pc.ready)
	h := &hop{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), hopKey{}, h), f.begin)
	defer cancel()
	defer h.answered.Store(true) // before cancel: see fleetTransport.RoundTrip
	cs, err := f.client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           f.httpClient(ep),
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
		// The hop's body limit bounds every event; the SDK's own bound
		// would fail the whole session where the limit fails one call.
		MaxEventSize: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolStateless})
	if err == nil {
		// The SDK falls back to an older revision when the peer does not
		// offer this one: a peer that is not a fleet handler.
		if got := cs.InitializeResult().ProtocolVersion; got != ProtocolStateless {
			_ = cs.Close()
			cs, err = nil, fmt.Errorf("peer %s speaks MCP %s, not %s", quote.Name(endpoint), got, ProtocolStateless)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || f.closed {
		if err == nil {
			_ = cs.Close()
			err = ErrClosed
		}
		pc.err = err
		if f.conns[endpoint] == pc {
			delete(f.conns, endpoint)
		}
		return
	}
	pc.cs = cs
}

// forget drops endpoint's session if it is still cs, and closes it.
func (f *forwarder) forget(endpoint string, cs *mcp.ClientSession) {
	f.mu.Lock()
	pc, ok := f.conns[endpoint]
	drop := ok && pc.cs == cs
	if drop {
		delete(f.conns, endpoint)
	}
	f.mu.Unlock()
	if drop {
		_ = cs.Close()
	}
}

// sessions returns how many peer sessions are open or opening.
func (f *forwarder) sessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// close closes every peer session; later forwards get ErrClosed.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for _, pc := range conns {
		<-pc.ready
		if pc.cs != nil {
			_ = pc.cs.Close()
		}
	}
	if c, ok := f.rt.(interface{ CloseIdleConnections() }); ok && f.own {
		c.CloseIdleConnections()
	}
}

// resultTooLarge: a forwarded result went past the hop's body limit; n
// bytes of it were read.
type resultTooLarge struct{ n int64 }

func (e *resultTooLarge) Error() string {
	return fmt.Sprintf("mcpserve: a forwarded result of more than %d bytes", e.n)
}

// callTool forwards a tools/call to endpoint with the caller's credential.
// The peer's JSON-RPC errors reach the client as the peer sent them; a
// peer that cannot be reached gives CodePeerUnavailable. It returns
// errSelf for this replica's own endpoint, and a *resultTooLarge for a
// response past the body limit.
func (f *forwarder) callTool(ctx context.Context, endpoint, cred string, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, error) {
	cs, err := f.session(ctx, endpoint)
	if errors.Is(err, errSelf) {
		return nil, err
	}
	if err != nil {
		return nil, f.failed(ctx, endpoint, nil, catalog.KindTool, p.Name, err)
	}
	h := &hop{cred: cred}
	res, err := cs.CallTool(context.WithValue(ctx, hopKey{}, h), &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments})
	h.answered.Store(true)
	if h.over.Load() {
		return nil, &resultTooLarge{n: h.read.Load()}
	}
	if err != nil {
		return nil, f.failed(ctx, endpoint, cs, catalog.KindTool, p.Name, err)
	}
	// The hop's own metadata (the holder's serverInfo, which the SDK adds
	// to every 2026-07-28 result) is not the caller's: this server adds
	// its own where the caller's protocol has it.
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// readResource forwards a resources/read like callTool.
func (f *forwarder) readResource(ctx context.Context, endpoint, cred, uri string) (*mcp.ReadResourceResult, error) {
	cs, err := f.session(ctx, endpoint)
	if errors.Is(err, errSelf) {
		return nil, err
	}
	if err != nil {
		return nil, f.failed(ctx, endpoint, nil, catalog.KindResource, uri, err)
	}
	h := &hop{cred: cred}
	res, err := cs.ReadResource(context.WithValue(ctx, hopKey{}, h), &mcp.ReadResourceParams{URI: uri})
	h.answered.Store(true)
	if h.over.Load() {
		return nil, &resultTooLarge{n: h.read.Load()}
	}
	if err != nil {
		return nil, f.failed(ctx, endpoint, cs, catalog.KindResource, uri, err)
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// failed maps a forward's failure onto the wire. cs is the session the
// request went out on, nil when none could be opened (so the request
// cannot have reached the peer). A session whose HTTP exchange failed is
// forgotten: its peer may be gone for good (a replica that restarts
// elsewhere advertises a new endpoint), and holding a session per dead
// endpoint would leak; the next call to a live one opens another, which
// costs no round trip.
func (f *forwarder) failed(ctx context.Context, endpoint string, cs *mcp.ClientSession, kind catalog.Kind, name string, err error) error {
	var (
		rpc *jsonrpc.Error
		ue  *url.Error
	)
	switch {
	case ctx.Err() != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s: request ended: %v", kind, quote.Name(name), context.Cause(ctx))}
	case errors.Is(err, ErrClosed):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s: server closed", kind, quote.Name(name))}
	case errors.As(err, &ue):
		// The HTTP exchange failed; the SDK wraps that in a JSON-RPC
		// error of its own ("rejected by transport") too, which is not
		// the peer's answer.
	case errors.As(err, &rpc) && rpc.Code != codeRejectedByTransport:
		// The peer's answer: its catalog's error, mapped by its server.
		return rpc
	}
	if cs != nil {
		f.forget(endpoint, cs)
	}
	retryable := cs == nil || refused(err)
	f.log.Warn("mcpserve: forwarding to the replica that holds the route failed", "kind", kind, "name", quote.Name(name), "retryable", retryable, "err", err)
	return &jsonrpc.Error{Code: CodePeerUnavailable,
		Message: fmt.Sprintf("%s %s: the replica that serves it cannot be reached", kind, quote.Name(name)),
		Data:    marshalData(map[string]any{"reason": "peer_unavailable", "retryable": retryable})}
}

// codeRejectedByTransport is the code of the SDK's error for a request its
// transport could not send.
const codeRejectedByTransport = -32005

// refused reports whether err is a failure to connect (the request never
// left this process), or a connection lost before the peer began its
// answer (a holder begins it before the body runs): either way the
// route's body cannot have run.
func refused(err error) bool {
	var (
		op *net.OpError
		nd *notDispatched
	)
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &nd)
}
