package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// hopHeader marks every request a forwarder sends, with the number of hops
// it has made: always 1, since a request that arrived forwarded is never
// forwarded again. The fleet handler refuses a request with another
// count, and the public handler refuses every request that
// carries it (or callerHeader): a forwarded request that reaches a public
// endpoint was sent to a mis-advertised one, and serving it there could
// forward it again.
const hopHeader = "Livereg-Fleet-Hop"

// Why a hop failed on this side of it. Each reaches the caller as
// CodePeerUnavailable, wrapped in the *url.Error of the HTTP client.
var (
	// errRedirect: the peer answered a redirect, which is never followed:
	// a signed request goes to the endpoint the fleet chose alone.
	errRedirect = errors.New("mcpserve: the peer answered a redirect; not followed")
	// errNotTheEndpoint: a request for another URL than the peer's
	// endpoint; it is not sent.
	errNotTheEndpoint = errors.New("mcpserve: a fleet request for another URL than the peer's endpoint; not sent")
	// errNoAnswer: the peer did not begin its response within
	// Fleet.ForwardTimeout.
	errNoAnswer = errors.New("mcpserve: the peer did not begin its response in time")
	// errHopTooLarge: the peer's response body went past the hop's limit.
	errHopTooLarge = errors.New("mcpserve: the peer's response exceeds the result limit")
)

// notDispatched is a failed exchange whose peer began no answer: the
// call was not dispatched there, so its body did not run.
type notDispatched struct{ err error }

func (e *notDispatched) Error() string { return e.err.Error() }
func (e *notDispatched) Unwrap() error { return e.err }

// hop is what one forwarded call carries through the HTTP client, in its
// request's context: the principal assertion of its caller (hopsign.go),
// and what its response body cost.
type hop struct {
	assert   string       // encoded; "" asserts an anonymous caller
	read     atomic.Int64 // bytes of the response body read
	over     atomic.Bool  // the body went past the limit and was refused
	answered atomic.Bool  // the client has its answer (or gave up)
	// abort ends the request's exchange, set by fleetTransport before
	// it sends the request.
	abort context.CancelCauseFunc
}

type hopKey struct{}

// hopBodyLimit is how much of a peer's response body a hop reads for a
// result limit of max: the result itself, once more for its JSON envelope
// and escaping, and 64 KiB for the rest of the response.
func hopBodyLimit(max int64) int64 {
	const envelope = 64 << 10
	if max > (1<<62)-envelope {
		return 1 << 62
	}
	return 2*max + envelope
}

// fleetTransport carries the requests of one peer session. It sends a
// request only to its peer's endpoint, signed (hopSigner.sign) with the
// hop count and the principal assertion of the request's hop. It
// bounds how long the response takes to begin, and reads at most limit
// bytes of the response body. Safe for concurrent use; each request costs
// a context, a timer, a client trace, a callback on its caller's context,
// a clone of its header, a read of its body (if not in memory already)
// and a signature.
type fleetTransport struct {
	base     http.RoundTripper
	sign     *hopSigner
	peer     string // the endpoint, as the peer advertises it
	endpoint endpointKey
	begin    time.Duration
	limit    int64
}

// hopRetryDelay is how long a forward waits before it sends again a
// request whose hop the peer refused (hopRefusedBy).
const hopRetryDelay = 100 * time.Millisecond

// hopRefusedBy reports whether resp is a peer's refusal of the hop itself
// (hopsign.go's hopRefusal): a 401 with the fleet's challenge, or a 503
// while its nonces are full. Nothing was dispatched.
func hopRefusedBy(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), hopRealm)
	case http.StatusServiceUnavailable:
		return resp.Header.Get("Retry-After") != ""
	}
	return false
}

func (t *fleetTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if keyOf(r.URL) != t.endpoint {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, errNotTheEndpoint
	}
	h, _ := r.Context().Value(hopKey{}).(*hop)
	data, err := requestBody(r)
	if err != nil {
		return nil, err
	}
	// The request's own context ends when the response does not begin in
	// time, and with the caller's, except after the answer came: the
	// caller has it then, and ends at once, while the rest of the body
	// (the end of the stream) may still be on its way. A cancel then
	// would cost the connection, which the transport keeps for the next
	// request once the body is read to its end; the rest has
	// ForwardTimeout to arrive.
	parent := r.Context()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	body := &hopBody{left: t.limit, hop: h}
	body.stop = context.AfterFunc(parent, func() {
		switch {
		case body.eof.Load():
		case h != nil && h.answered.Load():
			time.AfterFunc(t.begin, func() {
				if !body.eof.Load() {
					cancel(context.Cause(parent))
				}
			})
		default:
			cancel(context.Cause(parent))
		}
	})
	if h != nil {
		h.abort = cancel
	}
	timer := time.AfterFunc(t.begin, func() { cancel(errNoAnswer) })
	var answering atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { answering.Store(true) }})
	r = r.Clone(ctx)
	if data != nil {
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	}
	r.Header[hopHeader] = []string{"1"}
	var resp *http.Response
	for retried := false; ; retried = true {
		now := time.Now()
		assertion := anonymous(now)
		if h != nil && h.assert != "" {
			assertion = h.assert
		}
		if err := t.sign.sign(r, data, t.peer, assertion, now); err != nil {
			timer.Stop()
			body.stop()
			cancel(nil)
			return nil, &notDispatched{err}
		}
		resp, err = t.base.RoundTrip(r)
		if err != nil || retried || !hopRefusedBy(resp) {
			break
		}
		// The peer refused the hop itself, before dispatching anything:
		// its view may not have caught up yet with this replica's
		// enrollment (a replica that just joined, or opened a new
		// session). Once more, signed anew, a moment later, within the
		// same bound: the enrollment's watch event takes milliseconds.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		select {
		case <-ctx.Done():
			resp, err = nil, context.Cause(ctx)
		case <-time.After(hopRetryDelay):
			answering.Store(false)
			r = r.Clone(ctx)
			if data != nil {
				r.Body = io.NopCloser(bytes.NewReader(data))
			}
			continue
		}
		break
	}
	if !timer.Stop() {
		// The bound passed, whatever the base says: the peer's answer, if
		// one came, came too late, and its context has ended.
		if err == nil {
			_ = resp.Body.Close()
		}
		body.stop()
		return nil, fmt.Errorf("%w (%v)", errNoAnswer, t.begin)
	}
	if err != nil {
		body.stop()
		cancel(nil)
		if !answering.Load() && parent.Err() == nil {
			// The connection failed before the peer began its answer,
			// which a holder does before the body runs: the peer went
			// away (or closed an idle connection) with the call unrun.
			return nil, &notDispatched{err}
		}
		return nil, err
	}
	body.rc = resp.Body
	resp.Body = body
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A body the client reads whole (JSON, an error page) is read
		// here, so that one past the limit fails this request alone; the
		// SDK would fail the whole session for it.
		buf, err := io.ReadAll(body)
		_ = body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = &readBody{Reader: bytes.NewReader(buf), data: buf}
	}
	return resp, nil
}

// requestBody reads r's body whole, to sign it, and closes it; nil for
// none. Every forward's body is in memory and small: a copy.
func requestBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	return data, err
}

// CloseIdleConnections closes the base transport's idle connections.
func (t *fleetTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// hopBody is a response body read through the hop's limit. Reads are the
// caller's to serialize, as any body's.
type hopBody struct {
	rc   io.ReadCloser
	left int64
	hop  *hop
	eof  atomic.Bool // the body was read to its end
	stop func() bool // stops tying the request to its caller's context
}

func (b *hopBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errHopTooLarge
	}
	// One byte past the limit tells a body that ends at it from one
	// that goes on.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		n--
		err = errHopTooLarge
		if b.hop != nil {
			b.hop.over.Store(true)
		}
	}
	if b.hop != nil {
		b.hop.read.Add(int64(n))
	}
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Close closes the body. One closed before its end takes its connection
// with it, as any body does.
func (b *hopBody) Close() error {
	b.stop()
	return b.rc.Close()
}

// endpointKey is a URL reduced to what names an endpoint: scheme and host
// in lower case, without the scheme's default port, and the path ("/" for
// none), with the query.
type endpointKey struct{ scheme, host, path, query string }

func keyOf(u *url.URL) endpointKey {
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	switch {
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return endpointKey{scheme, host, path, u.RawQuery}
}

// parseEndpoint parses a fleet endpoint: an absolute http or https URL with
// a host.
func parseEndpoint(s string) (endpointKey, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return endpointKey{}, fmt.Errorf("not an http or https URL with a host")
	}
	return keyOf(u), nil
}

// forwardTool forwards a tools/call to the replica at endpoint, relaying
// its progress to cl, and counts its result against the limit as a local
// one's.
func (s *Server) forwardTool(ctx context.Context, endpoint, cred string, p *mcp.CallToolParamsRaw, cl *catalog.Client) (mcp.Result, error) {
	res, task, err := s.fleet.fwd.callTool(ctx, endpoint, cred, p, cl)
	if task != nil {
		return &relayedTask{raw: task}, nil
	}
	// A 2025-11-25 session is asked the holder's questions mid-call here,
	// and the call forwarded again with the answers (hoprounds.go).
	for n := 0; err == nil && res.InputRequests != nil && !namesCurrent(p.Meta); n++ {
		if n == maxForwardRounds {
			return tooManyRounds(p.Name), nil
		}
		responses, aerr := askOnBehalf(ctx, cl, res.InputRequests)
		if aerr != nil {
			return s.toolError(ctx, p.Name, aerr, false)
		}
		retry := *p
		retry.InputResponses, retry.RequestState = responses, res.RequestState
		res, task, err = s.fleet.fwd.callTool(ctx, endpoint, cred, &retry, cl)
		if task != nil {
			return &relayedTask{raw: task}, nil
		}
	}
	var big *resultTooLarge
	switch {
	case errors.Is(err, errSelf):
		return s.toolError(ctx, p.Name, catalog.ErrRouteGone, false)
	case !namesCurrent(p.Meta) && rpcCodeOf(err) == codeMissingClientCapabilities:
		// A 2025 caller gets a body's missing capability as a local one
		// gives it: the body's error, as a tool error.
		return errorResult((&catalog.CapabilityError{Tool: p.Name, Capability: requiredCapability(err)}).Error()), nil
	case errors.As(err, &big):
		return s.toolTooLarge(p.Name, big.n, true), nil
	case err != nil:
		return nil, err
	}
	if n, over := s.overLimit(sdkToolResultSize(res)); over {
		return s.toolTooLarge(p.Name, n, false), nil
	}
	return res, nil
}

// forwardResource is forwardTool for a resources/read.
func (s *Server) forwardResource(ctx context.Context, endpoint, cred string, p *mcp.ReadResourceParams, cl *catalog.Client) (mcp.Result, error) {
	uri := p.URI
	res, err := s.fleet.fwd.readResource(ctx, endpoint, cred, p, cl)
	for n := 0; err == nil && res.InputRequests != nil && !namesCurrent(p.Meta); n++ {
		if n == maxForwardRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resource %s asked for input more than %d times; given up", quote.Name(uri), maxForwardRounds)}
		}
		responses, aerr := askOnBehalf(ctx, cl, res.InputRequests)
		if aerr != nil {
			return nil, s.resourceError(ctx, uri, aerr, false)
		}
		retry := *p
		retry.InputResponses, retry.RequestState = responses, res.RequestState
		res, err = s.fleet.fwd.readResource(ctx, endpoint, cred, &retry, cl)
	}
	var big *resultTooLarge
	switch {
	case errors.Is(err, errSelf):
		return nil, s.resourceError(ctx, uri, catalog.ErrRouteGone, false)
	case errors.As(err, &big):
		return nil, s.resourceTooLarge(uri, big.n, true)
	case err != nil:
		return nil, err
	}
	var n int64
	for _, c := range res.Contents {
		if c != nil {
			n += sdkContentsSize(c)
		}
	}
	if n, over := s.overLimit(n); over {
		return nil, s.resourceTooLarge(uri, n, false)
	}
	return res, nil
}

// namesCurrent reports whether a request's _meta names protocol
// 2026-07-28 or later.
func namesCurrent(meta mcp.Meta) bool {
	v, _ := meta[metaProtocolVersion].(string)
	return v >= ProtocolStateless
}

// rpcCodeOf is err's JSON-RPC code; 0 for none.
func rpcCodeOf(err error) int64 {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return 0
}

// requiredCapability is the capability a -32021 error names: the first,
// in order, of its data's requiredCapabilities.
func requiredCapability(err error) string {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return ""
	}
	var data struct {
		Required map[string]json.RawMessage `json:"requiredCapabilities"`
	}
	if json.Unmarshal(werr.Data, &data) != nil {
		return ""
	}
	names := slices.Sorted(maps.Keys(data.Required))
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
