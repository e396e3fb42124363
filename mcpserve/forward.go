package mcpserve

import (
	"context"
	"encoding/json"
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

// forwarder sends calls to the replicas that hold their routes: each is
// one POST of a stateless request (protocol 2026-07-28) to the holder's
// fleet endpoint, over one pool of keep-alive connections that every peer
// shares, and its answer is read from the response (exchange, in
// hopexchange.go). Nothing is opened per peer but a client: a stateless
// request holds no state on the peer, so a peer that restarts needs
// nothing new, and no round trip precedes the first call.
//
// Each peer's requests go through a fleetTransport of its own, which
// sends them to that peer's endpoint alone, never follows a redirect, and
// bounds the wait for a response to begin and the bytes read of it.
type forwarder struct {
	peers  Peers
	rt     http.RoundTripper // the pool every peer's requests share
	own    bool              // rt is the forwarder's own, closed with it
	jar    http.CookieJar    // from Fleet.HTTPClient
	whole  time.Duration     // Fleet.HTTPClient's Timeout
	sign   *hopSigner        // signs every request, asserts callers
	tasks  bool              // the holder may start a task (fleettasks.go)
	self   endpointKey       // this replica's advertised endpoint
	isSelf bool              // self is set
	begin  time.Duration
	limit  int64  // of a response body, from MaxResultBytes
	meta   string // the _meta of every request, encoded
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	conns  map[string]*peerClient
}

// peerClient is how one peer is reached: its endpoint and the HTTP client
// whose transport is bound to it.
type peerClient struct {
	endpoint string
	hc       *http.Client
}

// errSelf: the route's endpoint is this replica's own advertised one.
var errSelf = errors.New("mcpserve: the route's endpoint is this replica's own")

// newForwarder makes the forwarder of a Server whose options passed
// startFleet's checks; maxResult is the Server's result limit.
func newForwarder(f *Fleet, sign *hopSigner, maxResult int64, log *slog.Logger) *forwarder {
	fw := &forwarder{peers: f.Peers, sign: sign, begin: cmpOr(f.ForwardTimeout, defaultForwardTimeout),
		limit: hopBodyLimit(maxResult), log: log, conns: map[string]*peerClient{}}
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
	fw.meta = hopMeta(&mcp.Implementation{Name: "livereg-fleet", Version: defaultVersion})
	return fw
}

// peer returns the client of the peer at endpoint, making it if need be,
// or errSelf for this replica's own endpoint.
func (f *forwarder) peer(endpoint string) (*peerClient, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if pc, ok := f.conns[endpoint]; ok {
		return pc, nil
	}
	ep, err := parseEndpoint(endpoint)
	switch {
	case err != nil:
		return nil, fmt.Errorf("peer endpoint %s: %w", quote.Name(endpoint), err)
	case f.isSelf && ep == f.self:
		return nil, errSelf
	}
	pc := &peerClient{endpoint: endpoint, hc: &http.Client{
		Transport:     &fleetTransport{base: f.rt, sign: f.sign, peer: endpoint, endpoint: ep, begin: f.begin, limit: f.limit},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
		Jar:           f.jar,
		Timeout:       f.whole,
	}}
	f.conns[endpoint] = pc
	return pc, nil
}

// forget drops endpoint's client if it is still pc.
func (f *forwarder) forget(endpoint string, pc *peerClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns[endpoint] == pc {
		delete(f.conns, endpoint)
	}
}

// sessions returns how many peers the forwarder holds a client for.
func (f *forwarder) sessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// close forgets every peer and closes the idle connections of the pool it
// owns; later forwards get ErrClosed. A forward in flight runs to its end.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	f.conns = nil
	f.mu.Unlock()
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

// callTool forwards a tools/call to endpoint for the caller whose
// credential is cred (a mark, whose principal ctx resolves: see
// hopSigner.assert);
// the holder's progress notifications go to cl, the caller's client. The
// peer's JSON-RPC errors reach the client as the peer sent them; a peer
// that cannot be reached gives CodePeerUnavailable. It returns errSelf for
// this replica's own endpoint, and a *resultTooLarge for a response past
// the body limit.
//
// When the holder started a task, the result is nil and task is the
// holder's CreateTaskResult, as it sent it.
func (f *forwarder) callTool(ctx context.Context, endpoint, cred string, p *mcp.CallToolParamsRaw, cl *catalog.Client) (res *mcp.CallToolResult, task json.RawMessage, err error) {
	var ans toolAnswer
	if err := f.forward(ctx, endpoint, cred, catalog.KindTool, p.Name, toolCall(p, cl, f.tasks), cl, &ans); err != nil {
		return nil, nil, err
	}
	if ans.task != nil {
		return nil, ans.task, nil
	}
	// The hop's own metadata (the holder's serverInfo, which a
	// 2026-07-28 result carries) is not the caller's: this server adds
	// its own where the caller's protocol has it.
	delete(ans.call.Meta, mcp.MetaKeyServerInfo)
	return &ans.call, nil, nil
}

// toolAnswer is a forwarded tools/call's result: the call's, or the
// holder's CreateTaskResult when it started a task.
type toolAnswer struct {
	call mcp.CallToolResult
	task json.RawMessage
}

// readResource forwards a resources/read like callTool.
func (f *forwarder) readResource(ctx context.Context, endpoint, cred string, p *mcp.ReadResourceParams, cl *catalog.Client) (*mcp.ReadResourceResult, error) {
	res := new(mcp.ReadResourceResult)
	if err := f.forward(ctx, endpoint, cred, catalog.KindResource, p.URI, resourceRead(p, cl), nil, res); err != nil {
		return nil, err
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// forward sends the request req names to the peer at endpoint and decodes
// its result into res.
func (f *forwarder) forward(ctx context.Context, endpoint, cred string, kind catalog.Kind, name string, req hopRequest, cl *catalog.Client, res any) error {
	pc, err := f.peer(endpoint)
	if errors.Is(err, errSelf) {
		return err
	}
	if err != nil {
		return f.failed(ctx, endpoint, nil, kind, name, err)
	}
	assertion, err := f.sign.assert(ctx, cred, time.Now())
	if err != nil {
		// The authenticator panicked: the forward fails closed, as a
		// local call would.
		f.log.Error("mcpserve: the authenticator panicked on a forwarded call's caller", "kind", kind, "name", quote.Name(name), "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s: internal error", kind, quote.Name(name))}
	}
	h := &hop{assert: assertion}
	err = f.exchange(context.WithValue(ctx, hopKey{}, h), pc, req, cl, res)
	if h.over.Load() {
		return &resultTooLarge{n: h.read.Load()}
	}
	if err != nil {
		return f.failed(ctx, endpoint, pc, kind, name, err)
	}
	return nil
}

// failed maps a forward's failure onto the wire. pc is the peer the
// request went out to, nil when it could not be sent (so it cannot have
// reached the peer). A peer whose HTTP exchange failed is forgotten: it
// may be gone for good (a replica that restarts elsewhere advertises a
// new endpoint), and holding a client per dead endpoint would leak; the
// next call to a live one makes another, which costs no round trip.
func (f *forwarder) failed(ctx context.Context, endpoint string, pc *peerClient, kind catalog.Kind, name string, err error) error {
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
		// The HTTP exchange failed.
	case errors.As(err, &rpc):
		// The peer's answer: its catalog's error, mapped by its server.
		return rpc
	}
	if pc != nil {
		f.forget(endpoint, pc)
	}
	retryable := pc == nil || refused(err)
	f.log.Warn("mcpserve: forwarding to the replica that holds the route failed", "kind", kind, "name", quote.Name(name), "retryable", retryable, "err", err)
	data := map[string]any{"reason": "peer_unavailable", "retryable": retryable}
	if hs := (*hopStatus)(nil); errors.As(err, &hs) {
		// The peer answered, with an HTTP error rather than a JSON-RPC
		// answer: its status tells a peer that refused the hop (401, or
		// 503 while its nonces are full) from one that could not be
		// reached, without the forwarder's log.
		data["status"] = hs.code
	}
	return &jsonrpc.Error{Code: CodePeerUnavailable,
		Message: fmt.Sprintf("%s %s: the replica that serves it cannot be reached", kind, quote.Name(name)),
		Data:    marshalData(data)}
}

// refused reports whether err is a failure to connect (the request never
// left this process), a connection lost before the peer began its
// answer (a holder begins it before the body runs), or the peer's
// refusal of the hop itself (hopRefused): either way the route's body
// cannot have run.
func refused(err error) bool {
	var (
		op *net.OpError
		nd *notDispatched
		hs *hopStatus
	)
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &nd) ||
		errors.As(err, &hs) && hs.hopRefused()
}
