package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
)

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// Binding keys: what a session is bound to. A key never contains a
// credential, only the subject it authenticated as.
const (
	anonymousKey = "anonymous"
	subjectKey   = "subject:"
)

// httpFront is what the HTTP front decides by, set by New and read-only
// after, but for the session slots, which count atomically.
type httpFront struct {
	handler http.Handler // the front: serveHTTP, for Handler
	sdk     http.Handler // the SDK's streamable HTTP handler behind it
	// current is the SDK's stateless handler that serves a stateful
	// server's 2026-07-28 requests, which name no session (see
	// currentRequestHTTP); nil on a stateless server, whose sdk serves
	// them.
	current  http.Handler
	auth     bool   // an authenticator is configured
	bind     bool   // HTTP sessions are bound to their creator's principal
	stateful bool   // the SDK's handler keeps sessions
	path     string // where Serve mounts the handler; "" for every path
	policy   CredentialPolicy
	origins  *http.CrossOriginProtection
	limits   Limits       // resolved: what Serve's http.Server gets
	slots    sessionSlots // sessions held against Options.MaxSessions
	idle     time.Duration
	maxBody  int64 // the SDK's MaxRequestBodyBytes resolved; 0 for none
	// anyHost: the SDK's DNS-rebinding check is off
	// (Options.DisableLocalhostProtection); jsonResponse: the SDK answers
	// in JSON, not events (Options.JSONResponse), which the fast path
	// leaves to it; noFast: the fast path is off (tests).
	anyHost, jsonResponse, noFast bool
}

// resolve checks the options of the HTTP front and sets h from them, but
// for the handlers, which New sets once the Server exists.
func (h *httpFront) resolve(opts Options, hopts *mcp.StreamableHTTPOptions, auth bool, clientShare, anonShare float64) error {
	if opts.RequireCredential < CredentialAuto || opts.RequireCredential > CredentialPerRoute {
		return fmt.Errorf("%w: unknown credential policy %d", ErrInvalidOptions, opts.RequireCredential)
	}
	origins, err := crossOrigin(opts.AllowedOrigins)
	if err != nil {
		return err
	}
	limits, err := opts.Limits.resolve()
	if err != nil {
		return err
	}
	maxSessions := cmpOr(opts.MaxSessions, defaultMaxSessions)
	h.auth, h.bind, h.stateful = auth, auth && !hopts.Stateless, !hopts.Stateless
	h.path, h.policy, h.origins, h.limits = opts.Path, opts.RequireCredential, origins, limits
	h.slots.max, h.slots.shares = int64(maxSessions), newShares(maxSessions, clientShare, anonShare, auth)
	h.idle, h.maxBody = hopts.SessionTimeout, maxBody(hopts.MaxRequestBodyBytes)
	// The Server times idle sessions out itself (sessionidle.go): the
	// SDK's timer would not see the POSTs the fast path serves.
	hopts.SessionTimeout = 0
	h.anyHost, h.jsonResponse = hopts.DisableLocalhostProtection, hopts.JSONResponse
	return nil
}

// front returns the front of the streamable HTTP handler; exposed is set
// by Serve for a listener beyond loopback (see CredentialAuto).
func (s *Server) front(exposed bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveHTTP(w, r, exposed) })
}

// serveHTTP is the front of the streamable HTTP handler. Before the SDK
// sees a request it
//
//   - refuses one that carries more than one Authorization header (400): a
//     proxy in front might judge the other one than the catalog would;
//   - refuses one marked as forwarded by a fleet
//     replica (400): it was sent to a mis-advertised endpoint, and serving
//     it here could forward it again;
//   - refuses a cross-origin request from an origin not allowed (403);
//   - where the credential policy asks for one, refuses a request without
//     a credential the authenticator accepts (401);
//   - with sessions bound (an authenticator, the default credential, a
//     stateful handler), refuses a request on a session that the same
//     principal did not create (403), so that nobody else can use or end
//     it, and an unknown session (404);
//   - ends the calls in flight on a session that its principal DELETEs, so
//     that the SDK's session close, which waits for them, does not hang;
//   - reserves a session slot for a POST that may create a session, and
//     refuses it at Options.MaxSessions, or over its client's share of
//     it (503; see shares.go);
//   - refuses a repeated Mcp-Method, Mcp-Name, Mcp-Param-* or
//     MCP-Protocol-Version header (400), and a body that is not one
//     strict JSON value (400, -32700; decode.go);
//   - refuses (400, CodeHeaderMismatch) a call of a tool that marks
//     arguments for headers whose Mcp-Param headers disagree with its
//     arguments, as the SDK does for its own tools (paramheaders.go);
//   - refuses a POST that MCP does not allow and the SDK would serve: a
//     JSON-RPC batch, an id that would not survive a round trip, an
//     overlong method (screen: 400 with -32600 or -32601);
//   - answers tasks/get, tasks/update and tasks/cancel itself (tasks.go),
//     after the Host, Content-Type and Accept checks the SDK would make
//     and with their credential authenticated again (taskfront.go),
//     and reads the taskIds of a subscriptions/listen, which the SDK
//     drops, refusing them without the tasks extension (400, -32021;
//     tasknotify.go);
//   - numbers each POST in requestHeader, so that a call's context ends
//     with the request that carried it;
//   - bounds what the SDK echoes of a request it refuses (echoBound).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, exposed bool) {
	if len(r.Header.Values("Authorization")) > 1 {
		http.Error(w, "Bad Request: more than one Authorization header", http.StatusBadRequest)
		return
	}
	if !refuseRepeatedHeader(w, r) {
		return
	}
	if forwardedRequest(r) {
		http.Error(w, "Bad Request: a request forwarded by a fleet replica reached a public MCP endpoint; "+
			"the replica that holds the route must advertise its fleet endpoint instead", http.StatusBadRequest)
		return
	}
	if err := s.checkOrigin(r); err != nil {
		http.Error(w, "Forbidden: cross-origin request from an origin not allowed", http.StatusForbidden)
		return
	}
	r.Header.Del(requestHeader)
	delete(r.Header, forwardedMark)
	delete(r.Header, sessionlessMark)
	sdk := s.http.sdk
	if s.http.current != nil && currentRequestHTTP(r) {
		// One endpoint for every client generation: a 2026-07-28
		// request goes to the stateless handler, and holds no session.
		sdk = s.http.current
		r.Header[sessionlessMark] = []string{"1"}
	}
	require := s.needsCredential(r, exposed)
	principal, authenticated, err := s.bindingKey(r, require)
	if err != nil {
		s.logAuthPanic(err, "http")
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	if require && !authenticated {
		refuseUnauthenticated(w)
		return
	}
	id := r.Header.Get(sessionIDHeader)
	var sc *sessionCalls
	if id != "" && s.http.stateful {
		sc, _ = s.calls.sessionByID(id)
	}
	if id != "" && s.http.bind {
		if sc == nil {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if sc.principal != principal {
			http.Error(w, "Forbidden: the session belongs to another principal", http.StatusForbidden)
			return
		}
	}
	if sc != nil && r.Method == http.MethodDelete {
		// Unbound sessions: anyone may end one, as the SDK allows.
		sc.cancel(errSessionEnded)
	}
	var lt *taskListen
	if r.Method == http.MethodPost {
		cl := s.clientOf(r, principal)
		if startsTasks(r) {
			r = withClient(r, cl) // its task's share (taskfront.go)
		}
		var sl *slot
		if id == "" && s.http.stateful && sdk == s.http.sdk {
			var reason string
			if sl, reason = s.http.slots.reserve(cl); sl == nil {
				s.refuseSession(w, reason)
				return
			}
			defer sl.release() // unless the session it created claimed it
			defer s.initializeEnded(w)
		}
		if sc != nil {
			idle := sc.fast.idle.Load()
			idle.begin()
			defer idle.end()
		}
		body, ok := s.readBody(w, r)
		if !ok || !strictBody(w, body.Bytes()) || !s.checkParamHeaders(w, r, body.Bytes()) {
			return
		}
		if tasksRequest(r) {
			// The SDK knows no tasks/* method: answered here (tasks.go).
			defer putBuf(body)
			ctx, cred := s.fleetCredential(r.Context(), bearer(r.Header))
			if r = r.WithContext(ctx); s.tasksFront(w, r, cred) {
				s.serveTasks(w, r, body.Bytes(), cred, false)
			}
			return
		}
		if fr, ok := s.fastTake(r, body.Bytes(), sc, false); ok {
			// The call runs under the request's own context: no number
			// in requestHeader is needed to tie it to the request.
			defer putBuf(body)
			s.fastServe(w, r, fr)
			return
		}
		if !s.screen(w, r, body.Bytes()) {
			return
		}
		if listenRequestHTTP(r) {
			// The SDK drops a listen's taskIds: read here (tasknotify.go).
			var ok bool
			if lt, ok = s.listenTasks(w, r, body.Bytes()); !ok {
				putBuf(body)
				return
			}
		}
		n, done := s.calls.openRequest(r.Context(), principal, cl, sl, lt)
		defer done()
		r.Header.Set(requestHeader, n)
	}
	eb := &echoBound{ResponseWriter: w}
	defer eb.finish()
	if lt != nil {
		// The task watcher writes on the stream beside the SDK.
		lt.out = &eventWriter{ResponseWriter: eb}
		defer lt.out.end()
		sdk.ServeHTTP(lt.out, r)
		return
	}
	sdk.ServeHTTP(eb, r)
}

// sessionlessMark marks, from the front to the receiving middleware, a
// stateful server's request that the stateless handler serves, whose
// session is the SDK's throwaway one. Like forwardedMark, it cannot be
// forged: the front deletes what a client sent under that name.
const sessionlessMark = "Livereg-Internal-Sessionless"

// currentRequestHTTP reports whether r is a request of protocol
// 2026-07-28, which names its revision in its header and belongs to no
// session.
func currentRequestHTTP(r *http.Request) bool {
	return r.Header.Get(protocolHeader) == ProtocolStateless && r.Header.Get(sessionIDHeader) == ""
}

// initializeEnded starts the idle wait of the session a POST without a
// session ID created, if it did, once its response is out: the session
// was created with that POST in flight (newIdleTimer).
func (s *Server) initializeEnded(w http.ResponseWriter) {
	if id := w.Header().Get(sessionIDHeader); id != "" {
		if sc, ok := s.calls.sessionByID(id); ok {
			sc.fast.idle.Load().end()
		}
	}
}

// bindingKey returns what a request's session is bound to: "" when
// sessions are not bound, otherwise the subject the request's bearer token
// authenticates as, or anonymousKey for no token or an unknown one; and
// whether the token authenticated. It calls the authenticator only when
// sessions are bound or force is set. An authenticator that panics is an
// error.
func (s *Server) bindingKey(r *http.Request, force bool) (key string, authenticated bool, err error) {
	if !s.http.bind && !force {
		return "", false, nil
	}
	key = anonymousKey
	if !s.http.bind {
		key = ""
	}
	cred := bearer(r.Header)
	if cred == "" {
		return key, false, nil
	}
	pr, err := bindsec.Authenticate(r.Context(), s.cat.Authenticator(), cred)
	switch {
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		return "", false, err
	case err != nil:
		return key, false, nil
	}
	if !s.http.bind {
		return "", true, nil
	}
	return subjectKey + pr.Subject(), true, nil
}

// sessionCreated records the principal that created ss, from the HTTP
// request that carried its initialize.
func (s *Server) sessionCreated(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	principal := ""
	var release func()
	var hr *httpRequest
	if ex := req.GetExtra(); ex != nil {
		if hr, _ = s.calls.request(ex.Header); hr != nil {
			principal = hr.principal
			if hr.slot.claim() {
				release = hr.slot.end
			}
		}
	}
	sc := s.calls.sessionWith(ss, principal, release)
	if hr != nil && s.http.stateful && s.http.idle > 0 && sc.fast.idle.Load() == nil {
		sc.fast.idle.Store(newIdleTimer(s.http.idle, func() { _ = ss.Close() }))
	}
}

// logAuthPanic logs an authenticator's panic. It logs the panic value only
// when it is a runtime error, whose text the runtime wrote: any other value
// may quote the credential the authenticator was given.
func (s *Server) logAuthPanic(err error, where string) {
	var p *bindsec.AuthenticatorPanic
	if !errors.As(err, &p) {
		s.log.Error("mcpserve: authentication failed", "where", where, "err", err)
		return
	}
	value := fmt.Sprintf("a %T (not shown: it may quote the credential)", p.Value)
	if re, ok := p.Value.(runtime.Error); ok {
		value = re.Error()
	}
	s.log.Error("mcpserve: the authenticator panicked; the request was refused", "where", where,
		"panic", value, "stack", string(p.Stack))
}

// closeBounded closes the sessions given, after ending their calls, and
// waits at most until ctx ends. A session whose body ignores its context
// finishes closing in the background once the body returns.
func (s *Server) closeBounded(ctx context.Context, sessions []*mcp.ServerSession) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		closed := make(chan struct{}, len(sessions))
		for _, ss := range sessions {
			go func() { _ = ss.Close(); closed <- struct{}{} }()
		}
		for range sessions {
			<-closed
		}
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		s.log.Warn("mcpserve: sessions still closing after the bound; a route body is ignoring its context",
			"sessions", len(sessions))
		return false
	}
}
