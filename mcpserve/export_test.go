package mcpserve

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// NewWithWindow is New with the coalescing wait replaced, so that a test
// decides when a window ends.
func NewWithWindow(cat *catalog.Catalog, opts Options, window func(stop <-chan struct{}) bool) (*Server, error) {
	return newServer(cat, opts, window)
}

// Content conversions, tested from outside the package.
var (
	ContentToSDK          = contentToSDK
	ContentFromSDK        = contentFromSDK
	ErrUnsupportedContent = errUnsupportedContent
)

// StatelessOf reports whether s serves streamable HTTP without sessions.
func StatelessOf(s *Server) bool { return !s.http.stateful }

// SessionTimeoutOf is the idle session timeout s gave the SDK (0: never).
func SessionTimeoutOf(s *Server) time.Duration { return s.http.idle }

// LimitsOf is the HTTP limits s resolved from its options.
func LimitsOf(s *Server) Limits { return s.http.limits }

// ForwardedMark is the header that marks a call forwarded here.
const ForwardedMark = forwardedMark

// OnForwarded has f called with the method of every message forwarded to
// s, before s serves it, on the fast path or the SDK's, so that a test can
// watch them.
func OnForwarded(s *Server, f func(method string)) {
	s.fleet.onForwarded = f
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if isForwarded(req.GetExtra()) {
				f(method)
			}
			return next(ctx, method, req)
		}
	})
}

// OnFastForwarded has f called with the method of every request
// forwarded to s that its fast path serves.
func OnFastForwarded(s *Server, f func(method string)) { s.fleet.onForwarded = f }

// PeerSessions is how many peers s's forwarder holds a client for.
func PeerSessions(s *Server) int { return s.fleet.fwd.sessions() }

// SetNotifierAfterRead makes f run on the notifier goroutine of every
// Server made until restore is called, right after the notifier read the
// catalog's versions and before it waits for the next change.
func SetNotifierAfterRead(f func()) (restore func()) {
	testHookAfterRead = f
	return func() { testHookAfterRead = nil }
}

// ListensHeld is how many open listen streams s holds a way to end: one
// per open stream, none once they ended.
func ListensHeld(s *Server) int {
	s.listens.mu.Lock()
	defer s.listens.mu.Unlock()
	return len(s.listens.live)
}

// SetRefusalClock makes the refusal log's rate limit read now, until the
// test ends.
func SetRefusalClock(t interface{ Cleanup(func()) }, now func() time.Time) {
	refusalClock = now
	t.Cleanup(func() { refusalClock = time.Now })
}

// Defaults and bounds, named for the tests outside the package.
const (
	DefaultSessionTimeout = defaultSessionTimeout
	DefaultNotifyWindow   = defaultNotifyWindow
	DefaultMaxHeaderBytes = defaultMaxHeaderBytes
	MaxNameBytes          = maxNameBytes
	MaxKeyBytes           = maxKeyBytes
	MaxIDBytes            = maxIDBytes
)

// NoFastPath turns s's fast path off: every request goes through the SDK,
// for a test to compare the two.
func NoFastPath(s *Server) { s.http.noFast = true }

// SetFastHook makes f run with the method of every request a fast path
// takes, until restore is called.
func SetFastHook(f func(method string)) (restore func()) {
	testHookFast = f
	return func() { testHookFast = nil }
}

// OnFastPath reports whether the fast path takes the requests of the
// session with this ID: its client's notifications/initialized has been
// served, which the SDK answers (202) before it handles it.
func OnFastPath(s *Server, id string) bool {
	sc, ok := s.calls.sessionByID(id)
	return ok && sc.fast.version.Load() != nil
}

// MaxListenTaskIDs is how many task IDs one listen stream looks at.
const MaxListenTaskIDs = maxListenTaskIDs

// HopAssertion is the principal a test's signed hop request asserts, as a
// forwarder would: the caller's Token is marked under the fleet token,
// never sent; "" asserts an anonymous caller. Refused asserts that the
// forwarder's authenticator refused Token.
type HopAssertion struct {
	Token   string
	Subject string
	Roles   []string
	Expires time.Time
	Refused bool
}

// SignHop signs req, whose body is body, as the replica id signs a
// request for the holder at endpoint at time at, asserting a, in a fleet
// whose token is token.
func SignHop(req *http.Request, body []byte, id Identity, token, endpoint string, a HopAssertion, at time.Time) error {
	g := &hopSigner{id: id, markKey: deriveMarkKey(token)}
	ha := hopAssertion{Subject: a.Subject, Roles: a.Roles, Expires: a.Expires.UnixMilli()}
	if a.Token != "" {
		ha.Mark = strings.TrimPrefix(g.markCredential(a.Token), credMarkPrefix)
		ha.Authenticated = !a.Refused
	}
	return g.sign(req, body, endpoint, ha.encode(), at)
}

// HopNonces is how many nonces s's fleet handler remembers.
func HopNonces(s *Server) int { return s.fleet.verify.nonces.size() }

// SetStateClock makes s read now where it issues and judges the expiry of
// requestStates. Call it before s serves.
func SetStateClock(s *Server, now func() time.Time) { s.roundKeys.now = now }
