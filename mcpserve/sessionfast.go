//lint:file-ignore SA1019 MCP logging is deprecated as of protocol 2026-07-28 but still served during its deprecation window, and clients of earlier protocols use it.

package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// sessionFast is what the fast path needs of a session, kept in step by
// the receiving middleware as the SDK serves the session's other methods:
// whether it may take the session's calls, its log level, and its idle
// timer. All fields are atomic: the fast path reads them on every request.
type sessionFast struct {
	// version is the protocol the session negotiated, once its client
	// sent notifications/initialized, if the fast path may serve it: a
	// revision it knows, and a client that takes neither sampling nor
	// elicitation, which a call could send only over the SDK's session.
	// nil until then, and for good otherwise.
	version atomic.Pointer[string]
	// level is the level logging/setLevel set; nil while none is set,
	// when no log message is sent.
	level atomic.Pointer[mcp.LoggingLevel]
	idle  atomic.Pointer[idleTimer]
	// listRoots asks the session's client for its roots, when it declared
	// them; set before version, made once so that a call costs nothing
	// for it.
	listRoots func(ctx context.Context) ([]catalog.Root, error)
}

// Notifications the middleware watches for the fast path, and the ones a
// forward relays.
const (
	notificationInitialized = "notifications/initialized"
	notificationCancelled   = "notifications/cancelled"
	notificationProgress    = "notifications/progress"
	notificationMessage     = "notifications/message"
)

// fastSessionVersion reports whether the fast path serves a session of
// revision v.
func fastSessionVersion(v string) bool { return v == "2025-11-25" || v == "2025-06-18" }

// noteSession updates what the fast path knows of req's session once the
// SDK has served method without an error.
func (s *Server) noteSession(method string, req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	sc := s.calls.of(ss)
	if sc == nil {
		return
	}
	switch method {
	case notificationInitialized:
		p := ss.InitializeParams()
		if p == nil || !fastSessionVersion(p.ProtocolVersion) {
			return
		}
		// A session that takes sampling or elicitation is asked on the
		// response stream of its call, which only the SDK's transport
		// carries. roots/list, which nearly every client offers, does not
		// keep a session off the fast path: asked from there, it travels
		// on the session's standalone stream (see fastWriter.client).
		sampling, elicitation, roots := offers(ss)
		if sampling || elicitation {
			return
		}
		if roots {
			sc.fast.listRoots = func(ctx context.Context) ([]catalog.Root, error) { return listRoots(ctx, ss) }
		}
		v := p.ProtocolVersion
		sc.fast.version.Store(&v)
	case methodSetLevel:
		if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && r.Params != nil {
			l := r.Params.Level
			sc.fast.level.Store(&l)
		}
	}
}

// takes reports whether the fast path may serve a request of the session
// that names version in its header.
func (sc *sessionCalls) takes(version string) bool {
	v := sc.fast.version.Load()
	return v != nil && *v == version
}

// cancelFast ends the fast-path call of the session whose request id a
// notifications/cancelled names; the SDK knows nothing of it.
func (s *Server) cancelFast(req mcp.Request) {
	r, ok := req.(*mcp.ServerRequest[*mcp.CancelledParams])
	if !ok || r.Params == nil || r.Session == nil {
		return
	}
	sc := s.calls.of(r.Session)
	if sc == nil {
		return
	}
	key := ""
	switch id := r.Params.RequestID.(type) {
	case string:
		key = "s" + id
	case float64:
		key = strconv.FormatFloat(id, 'f', -1, 64)
	default:
		return
	}
	sc.mu.Lock()
	cancel := sc.fastCalls[key]
	sc.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// trackFast registers a fast-path call of id on the session, for
// cancelFast, and returns the context it runs under and its end; ok is
// false, and nothing registered, when a call of the same id is in flight
// on the fast path, which the SDK refuses on its own path.
func (sc *sessionCalls) trackFast(ctx context.Context, id json.RawMessage) (_ context.Context, end func(), ok bool) {
	key := fastKey(id)
	sc.mu.Lock()
	if _, dup := sc.fastCalls[key]; dup {
		sc.mu.Unlock()
		return nil, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	if sc.fastCalls == nil {
		sc.fastCalls = map[string]context.CancelCauseFunc{}
	}
	sc.fastCalls[key] = cancel
	sc.mu.Unlock()
	return ctx, func() {
		sc.mu.Lock()
		delete(sc.fastCalls, key)
		sc.mu.Unlock()
		cancel(nil)
	}, true
}

// duplicateID is the SDK's refusal of a request whose id is in flight on
// its session.
func duplicateID(id json.RawMessage) *jsonrpc.Error {
	raw := string(id)
	if len(id) > 0 && id[0] == '"' {
		_ = json.Unmarshal(id, &raw)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %s", raw)}
}

// fastKey is the key of a request id as cancelFast reads one: a string
// id marked as such, an integer in its decimal form.
func fastKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] == '"' {
		var str string
		_ = json.Unmarshal(id, &str)
		return "s" + str
	}
	n, _ := strconv.ParseInt(string(id), 10, 64)
	return strconv.FormatInt(n, 10)
}
