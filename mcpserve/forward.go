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

	"github.com/livereg/livereg/internal/quote"
)

// connectTimeout bounds opening a client session to a peer (one
// server/discover round trip), whatever the first caller's context.
const connectTimeout = 5 * time.Second

// forwarder sends calls to the replicas that hold their routes, through
// the SDK's own client over streamable HTTP, stateless (protocol
// 2026-07-28): one client session per peer endpoint, opened on first use
// and shared by every call to that peer, over one pool of keep-alive
// connections. A stateless session holds no state on the peer, so a peer
// that restarts needs no new one; a session that fails to open is
// forgotten, and the next call opens another.
type forwarder struct {
	peers  Peers
	hc     *http.Client
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

func newForwarder(f *Fleet, log *slog.Logger) *forwarder {
	hc := f.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr}
	}
	hc = &http.Client{
		Transport:     fleetTransport{base: hc.Transport, token: f.Token},
		CheckRedirect: hc.CheckRedirect,
		Jar:           hc.Jar,
		Timeout:       hc.Timeout,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "livereg-fleet", Version: DefaultVersion}, &mcp.ClientOptions{Logger: log})
	return &forwarder{peers: f.Peers, hc: hc, client: client, log: log, conns: map[string]*peerConn{}}
}

// fleetTransport puts the fleet credential, and the caller's credential
// from the request's context, on every forwarded request.
type fleetTransport struct {
	base  http.RoundTripper
	token string
}

type callerKey struct{}

func (t fleetTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	r.Header.Del(callerHeader)
	if cred, _ := r.Context().Value(callerKey{}).(string); cred != "" {
		r.Header.Set(callerHeader, cred)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// session returns the client session to endpoint, opening it if need be.
// It waits at most until ctx ends; the open itself is bounded by
// connectTimeout, not by ctx, so that one impatient caller does not fail
// the others waiting on the same peer.
func (f *forwarder) session(ctx context.Context, endpoint string) (*mcp.ClientSession, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, ErrClosed
	}
	pc, ok := f.conns[endpoint]
	if !ok {
		pc = &peerConn{ready: make(chan struct{})}
		f.conns[endpoint] = pc
		go f.open(endpoint, pc)
	}
	f.mu.Unlock()
	select {
	case <-pc.ready:
		return pc.cs, pc.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (f *forwarder) open(endpoint string, pc *peerConn) {
	defer close(pc.ready)
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	cs, err := f.client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           f.hc,
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolStateless})
	if err == nil {
		// The SDK falls back to an older revision when the peer does not
		// offer this one: a peer that is not a fleet handler.
		if got := cs.InitializeResult().ProtocolVersion; got != ProtocolStateless {
			_ = cs.Close()
			cs, err = nil, fmt.Errorf("peer %s speaks MCP %s, not %s", endpoint, got, ProtocolStateless)
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
}

// callTool forwards a tools/call to endpoint with the caller's credential.
// The peer's JSON-RPC errors reach the client as the peer sent them; a
// peer that cannot be reached gives CodePeerUnavailable.
func (f *forwarder) callTool(ctx context.Context, endpoint, cred string, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	cs, err := f.session(ctx, endpoint)
	if err != nil {
		return nil, f.failed(ctx, endpoint, nil, "tool", p.Name, err)
	}
	res, err := cs.CallTool(context.WithValue(ctx, callerKey{}, cred), &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments})
	if err != nil {
		return nil, f.failed(ctx, endpoint, cs, "tool", p.Name, err)
	}
	// The hop's own metadata (the holder's serverInfo, which the SDK adds
	// to every 2026-07-28 result) is not the caller's: this server adds
	// its own where the caller's protocol has it.
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// readResource forwards a resources/read like callTool.
func (f *forwarder) readResource(ctx context.Context, endpoint, cred, uri string) (mcp.Result, error) {
	cs, err := f.session(ctx, endpoint)
	if err != nil {
		return nil, f.failed(ctx, endpoint, nil, "resource", uri, err)
	}
	res, err := cs.ReadResource(context.WithValue(ctx, callerKey{}, cred), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, f.failed(ctx, endpoint, cs, "resource", uri, err)
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
func (f *forwarder) failed(ctx context.Context, endpoint string, cs *mcp.ClientSession, kind, name string, err error) error {
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

// refused reports whether err is a failure to connect: the request never
// left this process, so the route's body cannot have run.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
