package etcdfleet

import "github.com/livereg/livereg/catalog"

// Peer returns the internal endpoint of the replica that holds kind's name
// (a tool's or prompt's name, a resource's URI, a template's key: the
// names Key takes), as the View has it: the
// endpoint that replica advertised (Config.Advertise) in its claim. ok is
// false when the View holds no claim on the name, when this replica holds
// it (a local route is served locally, never forwarded back), when the
// holder advertised no endpoint, when the endpoint is this replica's own
// (compared normalized: scheme and host case, default ports), and while the
// replica is between sessions (see View). The View holds only records the
// fleet signed, with endpoints Config.PeerPath and Config.Peers allow: Peer
// never names an endpoint anyone but the fleet chose. It is package
// mcpserve's Peers method: set a Replica as mcpserve.Fleet.Peers, and a
// server forwards the calls for routes other replicas hold.
//
// The answer is as fresh as the View: a route that started elsewhere a
// moment ago may not be located yet, and one that died may still be; the
// replica it names then answers for itself (mcpserve reports the call as
// route_gone). Peer is safe for concurrent use; it costs a key built from
// the name and one map lookup under the View's lock, and allocates only
// the key (and, with Config.Advertise set, parses the endpoint to compare
// it with this replica's own).
func (r *Replica) Peer(kind catalog.Kind, name string) (endpoint string, ok bool) {
	key, err := r.Key(kind, name)
	if err != nil {
		return "", false
	}
	rec, held := r.view.Holder(key)
	if !held || rec.Replica == r.cfg.Replica || rec.Endpoint == "" {
		return "", false
	}
	// A record under another replica's name that points here (a
	// mistyped Advertise, or one replica's records copied) would have
	// this replica forward to itself.
	if r.trust.self != "" && normalEndpoint(rec.Endpoint) == r.trust.self {
		return "", false
	}
	return rec.Endpoint, true
}
