package mcpserve

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Defaults of what bounds the HTTP sessions a Server holds.
const (
	// DefaultSessionTimeout closes an HTTP session that has received no
	// request for this long. Ordinary clients (the TypeScript SDK's
	// close(), the MCP Inspector) never send DELETE, so without a timeout
	// every session they open is held until the process ends.
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxSessions caps the HTTP sessions held at once. A session
	// costs about 15 KB at rest, so the cap bounds them near 15 MB.
	DefaultMaxSessions = 1000
)

// ErrTooManySessions: an initialize arrived while Options.MaxSessions
// sessions were open. It is answered with HTTP 503 and a Retry-After.
var ErrTooManySessions = errors.New("mcpserve: session limit reached")

// CredentialPolicy says which HTTP requests must carry a bearer token that
// the catalog's authenticator accepts before the SDK sees them.
type CredentialPolicy int

const (
	// CredentialAuto, the zero value, requires a valid credential on every
	// HTTP request, initialize included, when the server is reached beyond
	// loopback: Serve was given a listener that is not loopback, or the
	// request arrived on a connection whose local address is not loopback.
	// On loopback only the routes' plans ask for credentials. Without an
	// authenticator nothing is required (Serve refuses to listen beyond
	// loopback then).
	CredentialAuto CredentialPolicy = iota
	// CredentialAlways requires a valid credential on every HTTP request.
	CredentialAlways
	// CredentialPerRoute never requires one at the HTTP layer: anyone who
	// reaches the server may open sessions, and each route's plan decides.
	CredentialPerRoute
)

// sessionSlots counts the HTTP sessions held against Options.MaxSessions.
// A POST that may create a session (it carries no session ID) reserves a
// slot before the SDK sees it; the session its initialize creates claims
// the slot, and the slot is returned when that session ends. A request
// that created no session returns its slot when it ends.
type sessionSlots struct {
	max     int64 // <= 0: unlimited
	shares  *shares
	open    atomic.Int64
	opened  atomic.Uint64
	refused atomic.Uint64
}

// slot is one reservation: reserved, then claimed by a session or released.
type slot struct {
	slots  *sessionSlots
	client client // whose share the slot counts in
	state  atomic.Int32
}

const (
	slotReserved int32 = iota
	slotClaimed
	slotReleased
)

// reserve takes a slot for cl, or returns nil and why (ReasonShare when
// cl holds its share, ReasonCap at the cap). The share is taken first, so
// that a client over its share is refused as such even at the cap. A
// compare-and-swap rather than an add and an undo, so that Open never
// reads above the cap.
func (c *sessionSlots) reserve(cl client) (*slot, string) {
	if !c.shares.take(cl) {
		c.refused.Add(1)
		return nil, ReasonShare
	}
	for {
		n := c.open.Load()
		if c.max > 0 && n >= c.max {
			c.shares.give(cl)
			c.refused.Add(1)
			return nil, ReasonCap
		}
		if c.open.CompareAndSwap(n, n+1) {
			return &slot{slots: c, client: cl}, ""
		}
	}
}

// end gives back the slot of a session that ended.
func (sl *slot) end() {
	sl.slots.open.Add(-1)
	sl.slots.shares.give(sl.client)
}

// claim hands the slot to the session being created; false if the request
// already gave it back.
func (sl *slot) claim() bool {
	if sl == nil || !sl.state.CompareAndSwap(slotReserved, slotClaimed) {
		return false
	}
	sl.slots.opened.Add(1)
	return true
}

// release gives back a slot no session claimed.
func (sl *slot) release() {
	if sl != nil && sl.state.CompareAndSwap(slotReserved, slotReleased) {
		sl.end()
	}
}

// SessionStats is a snapshot of the HTTP sessions of a Server.
type SessionStats struct {
	// Open is how many sessions are held now, counting initializes in
	// progress.
	Open int64
	// Opened counts the sessions created since New.
	Opened uint64
	// Refused counts the initializes refused at Options.MaxSessions or
	// over a client's share of it (see RefusalStats for which).
	Refused uint64
	// Max is the cap in force; 0 means none.
	Max int64
}

// SessionStats reports the server's HTTP sessions: a few atomic loads,
// safe for concurrent use.
func (s *Server) SessionStats() SessionStats {
	return SessionStats{
		Open: s.http.slots.open.Load(), Opened: s.http.slots.opened.Load(),
		Refused: s.http.slots.refused.Load(), Max: max(s.http.slots.max, 0),
	}
}

// refuseSession answers an initialize at the session cap, or over its
// client's share of it (reason). Live sessions are untouched; the client
// may retry once one ends.
func (s *Server) refuseSession(w http.ResponseWriter, reason string) {
	err, limit := ErrTooManySessions, s.http.slots.max
	if reason == ReasonShare {
		err, limit = ErrOverShare, s.http.slots.shares.perClient
	}
	s.refused.sessions.refused(s.log, reason, limit)
	w.Header().Set("Retry-After", "30")
	msg := fmt.Sprintf("Service Unavailable: %v (%d sessions); retry later", err, limit)
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// needsCredential reports whether r must carry a valid credential under
// the server's policy. exposed is set by Serve for a listener beyond
// loopback.
func (s *Server) needsCredential(r *http.Request, exposed bool) bool {
	if !s.http.auth {
		return false
	}
	switch s.http.policy {
	case CredentialAlways:
		return true
	case CredentialPerRoute:
		return false
	}
	if exposed {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && !isLocal(local)
}

// refuseUnauthenticated answers a request without a valid credential
// where one is required (RFC 6750's 401 with a Bearer challenge).
func refuseUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
	http.Error(w, "Unauthorized: this server requires a valid bearer token on every request", http.StatusUnauthorized)
}

// crossOrigin builds the Origin check: Go's http.CrossOriginProtection,
// which trusts requests without browser headers (Sec-Fetch-Site, Origin),
// same-origin ones, and the origins listed.
func crossOrigin(allowed []string) (*http.CrossOriginProtection, error) {
	cop := http.NewCrossOriginProtection()
	for _, o := range allowed {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: allowed origin: %v", ErrInvalidOptions, err)
		}
	}
	return cop, nil
}

// checkOrigin applies the Origin check to every method. The MCP transport
// asks servers to validate Origin on all incoming connections, and
// CrossOriginProtection lets safe methods through, so GET (the standalone
// stream) and DELETE are checked as if they were POSTs.
func (s *Server) checkOrigin(r *http.Request) error {
	if r.Method == http.MethodPost {
		return s.http.origins.Check(r)
	}
	probe := r.Clone(r.Context())
	probe.Method = http.MethodPost
	return s.http.origins.Check(probe)
}

// sessionTimeout resolves Options.SessionTimeout: 0 is the default,
// negative never (0 to the SDK).
func sessionTimeout(d time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d > 0:
		return d
	}
	return DefaultSessionTimeout
}
