package mcpserve

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
