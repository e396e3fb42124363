package mcpserve

// Stats is a snapshot of what a Server holds against its caps, for
// metrics and tests.
type Stats struct {
	// Sessions are the HTTP sessions (Options.MaxSessions); Held counts
	// initializes in progress.
	Sessions CapStats
	// ListenStreams are the subscriptions/listen streams
	// (Options.MaxListenStreams).
	ListenStreams CapStats
	// Subscriptions are the resource subscriptions, one per session and
	// URI (Options.MaxSubscriptions).
	Subscriptions CapStats
	// SubscribedURIs counts the distinct URIs subscribed to.
	SubscribedURIs int
	// MaxSubscriptionsPerSession is the per-session cap in force; 0
	// means none.
	MaxSubscriptionsPerSession int64
	// Rechecked counts the subscribed URIs looked up again after the
	// owner serving them died.
	Rechecked uint64
}

// CapStats is what one cap holds, and what it refused and why.
type CapStats struct {
	// Held is how many are held now; Opened counts those admitted since
	// New.
	Held   int64
	Opened uint64
	// Max is the cap in force; 0 means none.
	Max int64
	// RefusedAtCap counts the requests refused at the cap itself;
	// RefusedOverShare those of a client over its share of the cap
	// (Options.ClientShare, Options.AnonymousShare); RefusedPerSession
	// (subscriptions only) those of a session at
	// Options.MaxSubscriptionsPerSession.
	RefusedAtCap, RefusedOverShare, RefusedPerSession uint64
}

// Stats reports what the server holds against its caps. It is safe for
// concurrent use; it takes the subscription table's mutex, so it costs
// one lock and a few atomic loads. The counters are read one by one, so
// a snapshot taken under load may be off by the requests in flight.
func (s *Server) Stats() Stats {
	st := Stats{
		Sessions: CapStats{
			Held: s.http.slots.open.Load(), Opened: s.http.slots.opened.Load(), Max: max(s.http.slots.max, 0),
		},
		ListenStreams: CapStats{
			Held: s.listens.open.Load(), Opened: s.listens.opened.Load(), Max: max(s.listens.max, 0),
		},
	}
	t := s.subs
	t.mu.Lock()
	st.Subscriptions = CapStats{Held: t.ix.total, Opened: t.ix.opened, Max: max(t.ix.max, 0)}
	st.SubscribedURIs = len(t.byURI)
	st.MaxSubscriptionsPerSession = max(t.ix.perSession, 0)
	t.mu.Unlock()
	st.Rechecked = t.ix.lookups.Load()
	s.refused.sessions.count(&st.Sessions)
	s.refused.listens.count(&st.ListenStreams)
	s.refused.subs.count(&st.Subscriptions)
	return st
}

// count copies the refusals of rf into cs.
func (rf *refusals) count(cs *CapStats) {
	cs.RefusedAtCap, cs.RefusedOverShare, cs.RefusedPerSession = rf.cap.Load(), rf.share.Load(), rf.session.Load()
}
