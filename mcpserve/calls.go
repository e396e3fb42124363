package mcpserve

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Why a call's context ended, as context.Cause reports it to a route body.
var (
	// errRequestEnded: the HTTP request that carried the call ended: its
	// client disconnected, or the SDK released it (the session closed).
	errRequestEnded = errors.New("mcpserve: the HTTP request carrying the call ended")
	// errSessionEnded: the session the call belongs to is being closed.
	errSessionEnded = errors.New("mcpserve: the session was closed")
)

// requestHeader carries, from the HTTP front (serveHTTP) to the receiving
// middleware, the number of the HTTP request that carried a message. The
// SDK hands the middleware the request's header map but not its context,
// and runs handlers on a context of the session, not of the request. The
// front deletes whatever value a client sent, so the number cannot be
// forged.
const requestHeader = "Livereg-Internal-Request"

// calls ties the context of each tools/call and resources/read to what
// should end it. The SDK cancels a handler's context only after it closed
// the session's connection, and closing the connection first waits for the
// handlers: a body that honours its context would never see it end, and a
// session close (a DELETE, Server.Close) would wait on it forever. So the
// server ends a call's context itself when
//
//   - the HTTP request that carried the call ends (its client went away,
//     or the SDK released the request because the session closed);
//   - its session is about to be closed (DELETE, ServeTransport's context,
//     Server.Close, the graceful shutdown's deadline).
//
// All methods are safe for concurrent use.
type calls struct {
	next     atomic.Uint64
	requests sync.Map // request number (string) -> *httpRequest

	mu       sync.Mutex
	closed   bool
	sessions map[*mcp.ServerSession]*sessionCalls
	byID     map[string]*sessionCalls // HTTP sessions, by session ID
	// loose holds the calls of no registered session (see start).
	loose map[*context.CancelCauseFunc]struct{}

	// stateless: the HTTP handler makes each request a session of its
	// own, which ends with the request, as the fleet's handler does for a
	// call forwarded here. A call that came over HTTP is then tied to its
	// request alone, and its session is not registered, which
	// would cost a map entry and a goroutine waiting for it to end, per
	// call, for nothing a request's end does not already give.
	stateless bool
}

// httpRequest is one HTTP POST in flight.
type httpRequest struct {
	ctx context.Context
	// principal is the binding key of the request's credential (see
	// bindingKey); "" when sessions are not bound.
	principal string
	// client is whose share the request's session, listen stream and
	// subscriptions count in (see shares.go).
	client client
	// slot is the session slot the request reserved, if it may create a
	// session; the session its initialize creates claims it.
	slot *slot
	// tasks is the task part of a subscriptions/listen (tasknotify.go);
	// nil for any other request.
	tasks *taskListen
}

// sessionCalls is what the server knows of one session.
type sessionCalls struct {
	id string
	ss *mcp.ServerSession
	// principal is the binding key of the credential that created the
	// session; requests on it must present the same (see serveHTTP).
	principal string
	mu        sync.Mutex
	inflight  map[*context.CancelCauseFunc]struct{}
	// fastCalls are the calls in flight on the fast path, by request id
	// (fastKey), for notifications/cancelled to end.
	fastCalls map[string]context.CancelCauseFunc
	// ended is why the session's calls were ended; a call that starts
	// later begins cancelled with it, as the session is being closed.
	ended error
	// What the fast path needs of the session (sessionfast.go).
	fast sessionFast
}

func newCalls(stateless bool) *calls {
	return &calls{sessions: map[*mcp.ServerSession]*sessionCalls{}, byID: map[string]*sessionCalls{},
		loose: map[*context.CancelCauseFunc]struct{}{}, stateless: stateless}
}

// openRequest registers an HTTP request and returns the number to put in
// requestHeader and the function to call when the request has ended.
func (c *calls) openRequest(ctx context.Context, principal string, cl client, sl *slot, lt *taskListen) (string, func()) {
	id := strconv.FormatUint(c.next.Add(1), 36)
	c.requests.Store(id, &httpRequest{ctx: ctx, principal: principal, client: cl, slot: sl, tasks: lt})
	return id, func() { c.requests.Delete(id) }
}

// request returns the HTTP request that carried a message with header h:
// ok is false for a message that came another way (stdio, in memory), and
// hr is nil for one whose request has already ended.
func (c *calls) request(h http.Header) (hr *httpRequest, ok bool) {
	if h == nil {
		return nil, false
	}
	id := h.Get(requestHeader)
	if id == "" {
		return nil, false
	}
	if v, found := c.requests.Load(id); found {
		return v.(*httpRequest), true
	}
	return nil, true
}

// sessionWith returns the calls of ss, registering ss with the given
// binding key if it is new. A registered session is forgotten when it
// ends, and then ended (its session slot's release), if set, is called;
// ended is called at once if ss was registered already.
func (c *calls) sessionWith(ss *mcp.ServerSession, principal string, ended func()) *sessionCalls {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.sessions[ss]; ok {
		if ended != nil {
			ended()
		}
		return sc
	}
	return c.sessionLocked(ss, principal, ended)
}

func (c *calls) sessionLocked(ss *mcp.ServerSession, principal string, ended func()) *sessionCalls {
	if sc, ok := c.sessions[ss]; ok {
		return sc
	}
	sc := &sessionCalls{id: ss.ID(), ss: ss, principal: principal, inflight: map[*context.CancelCauseFunc]struct{}{}}
	c.sessions[ss] = sc
	if sc.id != "" {
		c.byID[sc.id] = sc
	}
	go func() {
		_ = ss.Wait()
		sc.fast.idle.Load().stop()
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.sessions, ss)
		if c.byID[sc.id] == sc {
			delete(c.byID, sc.id)
		}
		if ended != nil {
			ended()
		}
	}()
	return sc
}

// of returns the calls of ss, if it is registered.
func (c *calls) of(ss *mcp.ServerSession) *sessionCalls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[ss]
}

// sessionByID returns the registered HTTP session with this ID.
func (c *calls) sessionByID(id string) (*sessionCalls, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc, ok := c.byID[id]
	return sc, ok
}

// start returns the context a call of req runs under and the function that
// ends it; ctx is the SDK's handler context.
func (c *calls) start(ctx context.Context, req mcp.Request) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	stop := func() bool { return false }
	viaHTTP := false
	if ex := req.GetExtra(); ex != nil {
		if hr, ok := c.request(ex.Header); ok {
			viaHTTP = true
			if hr == nil {
				cancel(errRequestEnded) // it ended before the call began
			} else {
				stop = context.AfterFunc(hr.ctx, func() { cancel(errRequestEnded) })
			}
		}
	}
	// Registered under c.mu, which cancelAll takes to set closed: a call
	// either sees closed or is in the set that cancelAll then cancels.
	var sc *sessionCalls
	c.mu.Lock()
	if s, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil && !(viaHTTP && (c.stateless || isForwarded(req.GetExtra()) || sessionless(req.GetExtra()))) {
		sc = c.sessionLocked(s, "", nil)
	}
	if c.closed {
		cancel(ErrClosed)
	}
	if sc != nil {
		sc.mu.Lock()
		if sc.ended != nil {
			cancel(sc.ended)
		}
		sc.inflight[&cancel] = struct{}{}
		sc.mu.Unlock()
	} else {
		c.loose[&cancel] = struct{}{}
	}
	c.mu.Unlock()
	return cctx, func() {
		stop()
		if sc != nil {
			sc.mu.Lock()
			delete(sc.inflight, &cancel)
			sc.mu.Unlock()
		} else {
			c.mu.Lock()
			delete(c.loose, &cancel)
			c.mu.Unlock()
		}
		cancel(nil)
	}
}

// cancel ends the context of every call in flight on the session.
func (sc *sessionCalls) cancel(cause error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended == nil {
		sc.ended = cause
	}
	for f := range sc.inflight {
		(*f)(cause)
	}
}

// cancelSession ends the calls in flight on ss.
func (c *calls) cancelSession(ss *mcp.ServerSession, cause error) {
	c.mu.Lock()
	sc := c.sessions[ss]
	c.mu.Unlock()
	if sc != nil {
		sc.cancel(cause)
	}
}

// cancelAll ends every call in flight; with closing set, every call that
// starts later begins cancelled.
func (c *calls) cancelAll(cause error, closing bool) {
	c.mu.Lock()
	if closing {
		c.closed = true
	}
	all := make([]*sessionCalls, 0, len(c.sessions))
	for _, sc := range c.sessions {
		all = append(all, sc)
	}
	loose := make([]*context.CancelCauseFunc, 0, len(c.loose))
	for f := range c.loose {
		loose = append(loose, f)
	}
	c.mu.Unlock()
	for _, sc := range all {
		sc.cancel(cause)
	}
	for _, f := range loose {
		(*f)(cause)
	}
}
