package mcpserve

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SubscriptionTable returns the URIs and the sessions the server's table
// of resource subscriptions holds.
func (s *Server) SubscriptionTable() (uris, sessions int) { return s.subs.size() }

// SubscribersOf returns the sessions subscribed to uri.
func (s *Server) SubscribersOf(uri string) int {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	if us := s.subs.byURI[uri]; us != nil {
		return len(us.sessions)
	}
	return 0
}

// SetSubscribeRecorded makes f run each time s's table has recorded a
// resources/subscribe, before the SDK records it in its own table. Set it
// before any client subscribes.
func (s *Server) SetSubscribeRecorded(f func(uri string, unsubscribe func())) {
	s.subs.recorded = func(ss *mcp.ServerSession, uri string) {
		f(uri, func() {
			// What a resources/unsubscribe of the session's that ran
			// meanwhile does to the table.
			_ = s.subs.unsubscribe(context.Background(), &mcp.UnsubscribeRequest{Session: ss, Params: &mcp.UnsubscribeParams{URI: uri}})
		})
	}
}

// RelayFrom hands s's table an update of uri as if read from its stream
// to the peer at endpoint: what a stream still open, or a read in flight,
// may deliver after the URI left it.
func (s *Server) RelayFrom(endpoint, uri string) {
	s.subs.mu.Lock()
	ps := s.subs.fleet.streams[endpoint]
	s.subs.mu.Unlock()
	if ps != nil {
		s.subs.relay(ps, uri)
	}
}

// SubscriptionsHeld returns the subscriptions counted against the caps.
func (s *Server) SubscriptionsHeld() int {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	return int(s.subs.ix.total)
}

// SetSubscriptionClock makes s's table read expiries on now.
func SetSubscriptionClock(s *Server, now func() time.Time) {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	s.subs.now = now
}
