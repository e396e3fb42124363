package mcpserve

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Defaults of what bounds the HTTP sessions a Server holds.
const (
	// defaultSessionTimeout closes an HTTP session that has received no
	// request for this long. Ordinary clients (the TypeScript SDK's
	// close(), the MCP Inspector) never send DELETE, so without a timeout
	// every session they open is held until the process ends.
	defaultSessionTimeout = 10 * time.Minute
	// defaultMaxSessions caps the HTTP sessions held at once. A session
	// costs about 15 KB at rest, so the cap bounds them near 15 MB.
	defaultMaxSessions = 1000
)

// errTooManySessions: an initialize arrived while Options.MaxSessions
// sessions were open. It is answered with HTTP 503 and a Retry-After.
var errTooManySessions = errors.New("mcpserve: session limit reached")

// sessionSlots counts the HTTP sessions held against Options.MaxSessions.
// A POST that may create a session (it carries no session ID) reserves a
// slot before the SDK sees it; the session its initialize creates claims
// the slot, and the slot is returned when that session ends. A request
// that created no session returns its slot when it ends.
type sessionSlots struct {
	max    int64 // <= 0: unlimited
	shares *shares
	open   atomic.Int64
	opened atomic.Uint64
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

// reserve takes a slot for cl, or returns nil and why (reasonShare when
// cl holds its share, reasonCap at the cap). The share is taken first, so
// that a client over its share is refused as such even at the cap. A
// compare-and-swap rather than an add and an undo, so that Open never
// reads above the cap.
func (c *sessionSlots) reserve(cl client) (*slot, string) {
	if !c.shares.take(cl) {
		return nil, reasonShare
	}
	for {
		n := c.open.Load()
		if c.max > 0 && n >= c.max {
			c.shares.give(cl)
			return nil, reasonCap
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

// refuseSession answers an initialize at the session cap, or over its
// client's share of it (reason). Live sessions are untouched; the client
// may retry once one ends.
func (s *Server) refuseSession(w http.ResponseWriter, reason string) {
	err, limit := errTooManySessions, s.http.slots.max
	if reason == reasonShare {
		err, limit = errOverShare, s.http.slots.shares.perClient
	}
	s.refused.sessions.refused(s.log, reason, limit)
	w.Header().Set("Retry-After", "30")
	msg := fmt.Sprintf("Service Unavailable: %v (%d sessions); retry later", err, limit)
	http.Error(w, msg, http.StatusServiceUnavailable)
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
	return defaultSessionTimeout
}
