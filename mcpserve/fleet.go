package mcpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/internal/quote"
)

// DefaultFleetPath is where Serve and ListenAndServe mount the fleet
// handler when Fleet.Path is empty.
const DefaultFleetPath = "/fleet"

// MinFleetTokenBytes is the shortest fleet credential New accepts.
const MinFleetTokenBytes = 16

// DefaultForwardTimeout is how long a forward waits for the holder's
// response to begin when Fleet.ForwardTimeout is 0.
const DefaultForwardTimeout = 5 * time.Second

// DefaultMaxConnsPerPeer caps the connections the Server's own fleet
// client opens to one peer when Fleet.MaxConnsPerPeer is 0.
const DefaultMaxConnsPerPeer = 64

// CodePeerUnavailable is the JSON-RPC error code of a call forwarded to the
// replica that holds its route when that replica cannot be reached, with
// data {"reason":"peer_unavailable","retryable":R}. R is true when the
// route's body surely did not run: the peer refused the connection, or
// lost it before it began its answer, which a holder does before it runs
// the body; false when the exchange failed after the request may have
// reached the body, or the peer did not begin its answer within
// Fleet.ForwardTimeout.
const CodePeerUnavailable int64 = -32030

// callerHeader carries, from a forwarding replica to the one that serves
// the call, the credential the original caller presented. Only the fleet
// handler reads it, and only after the fleet credential was checked.
const callerHeader = "Livereg-Fleet-Caller"

// Fleet makes a Server one of many replicas that serve one catalog (see
// the package doc's "Serving a fleet"): a tools/call or resources/read for
// a route that another replica's consumer holds is forwarded to that
// replica, which serves it through its own catalog, with the caller's
// credential, under its live owner's plan.
type Fleet struct {
	// Peers locates the replica that holds a route. package etcdfleet's
	// Replica is one. Required.
	Peers Peers
	// Token is the fleet credential, at least MinFleetTokenBytes long and
	// the same on every replica: forwarded requests carry it as their
	// bearer token, and the fleet handler refuses (401) every request
	// that does not. It is compared in constant time.
	Token string
	// PreviousTokens are fleet credentials the fleet handler also
	// accepts, never sent: while a fleet rotates its token (package
	// etcdfleet's doc, "Rotation"), a replica on the new token still
	// answers one that forwards with the old. Each is at least
	// MinFleetTokenBytes.
	PreviousTokens []string
	// Path is where Serve and ListenAndServe mount the fleet handler,
	// beside the public one; empty means DefaultFleetPath. A replica
	// advertises the URL of this path to the others.
	Path string
	// Advertise is this replica's own fleet endpoint, the URL the others
	// forward to (etcdfleet.Config.Advertise): an absolute http or https
	// URL. A route that Peers places there is never forwarded, whatever
	// the view says: the call is answered as one for a route gone
	// (-32602 route_gone), as it is here that the route is not. URLs are
	// compared with scheme and host in lower case and without the
	// scheme's default port. Empty means unknown: nothing is compared.
	Advertise string
	// ForwardTimeout bounds how long a forward waits for the holder's
	// response to begin (its status and headers; a holder begins as soon
	// as it dispatches the call), and how long opening a session to a
	// peer takes (one round trip). The body of the response may take
	// longer: a route body runs as long as the caller's context allows.
	// A peer that does not begin in time (frozen, or too busy to
	// dispatch) gives CodePeerUnavailable, not retryable: the request may
	// have reached it. 0 means DefaultForwardTimeout; negative is
	// invalid.
	ForwardTimeout time.Duration
	// MaxConnsPerPeer caps the connections the Server's own client opens
	// to one peer; a forward beyond the cap waits for one, within
	// ForwardTimeout. 0 means DefaultMaxConnsPerPeer; negative means no
	// cap. It does not apply to an HTTPClient given: cap that client's
	// transport (http.Transport.MaxConnsPerHost).
	MaxConnsPerPeer int
	// HTTPClient carries forwarded requests. nil means a client of the
	// Server's own, which keeps up to 64 idle connections per peer and
	// opens at most MaxConnsPerPeer. Of a client given, the transport,
	// cookie jar and Timeout are used; its CheckRedirect is not: a
	// forward never follows a redirect.
	HTTPClient *http.Client
}

// Peers locates routes held by other replicas.
type Peers interface {
	// Peer returns the fleet endpoint of the replica, other than this
	// one, that holds the route of kind ("tool" or "resource") and name,
	// and false when no other replica is known to. It is called on
	// every call for a route this replica does not hold, concurrently,
	// and must not block.
	Peer(kind, name string) (endpoint string, ok bool)
}

// fleetTokenDigest is the SHA-256 of the fleet credential: comparing
// digests in constant time reveals neither the token nor its length.
type fleetTokenDigest [sha256.Size]byte

func (d *fleetTokenDigest) matches(token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], d[:]) == 1
}

// startFleet checks opts.Fleet and, when it is set, builds what serving a
// fleet takes: the forwarder, and the internal server that answers
// forwarded requests. The internal server serves the same catalog,
// stateless, with the caller's credential from callerHeader (see
// Server.credential), and never
// forwards: a forwarded call is served here or not at all, so a call can
// cross at most one hop, whatever the replicas' views say.
func (s *Server) startFleet(opts Options) error {
	f := opts.Fleet
	if f == nil {
		return nil
	}
	switch {
	case f.Peers == nil:
		return fmt.Errorf("%w: Fleet without Peers", ErrInvalidOptions)
	case len(f.Token) < MinFleetTokenBytes:
		return fmt.Errorf("%w: a fleet token of %d bytes; at least %d", ErrInvalidOptions, len(f.Token), MinFleetTokenBytes)
	case slices.ContainsFunc(f.PreviousTokens, func(t string) bool { return len(t) < MinFleetTokenBytes }):
		return fmt.Errorf("%w: a previous fleet token shorter than %d bytes", ErrInvalidOptions, MinFleetTokenBytes)
	case f.Path != "" && (f.Path[0] != '/' || f.Path == s.path):
		return fmt.Errorf("%w: fleet path %s is not an absolute URL path apart from Path", ErrInvalidOptions, quote.Name(f.Path))
	case f.ForwardTimeout < 0:
		return fmt.Errorf("%w: negative forward timeout %v", ErrInvalidOptions, f.ForwardTimeout)
	}
	if f.Advertise != "" {
		if _, err := parseEndpoint(f.Advertise); err != nil {
			return fmt.Errorf("%w: advertised fleet endpoint %s: %v", ErrInvalidOptions, quote.Name(f.Advertise), err)
		}
	}
	internal, err := newServer(s.cat, Options{
		Name:              opts.Name,
		Version:           opts.Version,
		Logger:            opts.Logger,
		Stateless:         true,
		RequireCredential: CredentialPerRoute,
		MaxResultBytes:    opts.MaxResultBytes,
		MaxListenStreams:  -1,
		ShutdownTimeout:   opts.ShutdownTimeout,
	}, timerWindow(DefaultNotifyWindow))
	if err != nil {
		return err
	}
	internal.forwarded = true
	s.internal = internal
	s.fleetPath = orString(f.Path, DefaultFleetPath)
	s.fleetToken = sha256.Sum256([]byte(f.Token))
	for _, t := range f.PreviousTokens {
		s.fleetPrevious = append(s.fleetPrevious, sha256.Sum256([]byte(t)))
	}
	s.fwd = newForwarder(f, s.maxResult, s.log)
	return nil
}

// forwardedCredential is the credential of a call forwarded here: what
// the original caller presented on the replica that forwarded it.
func forwardedCredential(_ context.Context, req mcp.Request) string {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get(callerHeader)
	}
	return ""
}

// FleetHandler returns the handler that answers calls other replicas
// forward here: mount it where this replica's advertised endpoint points
// (Serve and ListenAndServe mount it at Fleet.Path). Every request must
// carry the fleet credential as its bearer token (401 otherwise, 400 with
// more than one Authorization header). A forwarder's request carries its
// hop count, which must be 1: 508 for a count above (a request forwarded
// again), 400 for a malformed one.
// It is then served by this replica's catalog alone, never forwarded
// again, and its response begins (status and headers) as soon as its call
// is dispatched, so that the forwarder can tell a frozen replica from a
// slow route. Without Options.Fleet it answers 404.
func (s *Server) FleetHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.internal == nil {
			http.NotFound(w, r)
			return
		}
		if len(r.Header.Values("Authorization")) > 1 {
			http.Error(w, "Bad Request: more than one Authorization header", http.StatusBadRequest)
			return
		}
		if tok := bearer(r.Header); !s.fleetToken.matches(tok) &&
			!slices.ContainsFunc(s.fleetPrevious, func(d fleetTokenDigest) bool { return d.matches(tok) }) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="livereg-fleet"`)
			http.Error(w, "Unauthorized: the fleet credential is required", http.StatusUnauthorized)
			return
		}
		switch hops := r.Header.Values(hopHeader); {
		case len(hops) == 0, len(hops) == 1 && hops[0] == "1":
			// A forwarder's first hop, or a client of the fleet's own.
		case len(hops) == 1 && isHopCount(hops[0]):
			http.Error(w, "Loop Detected: a fleet request may cross one hop; this one was forwarded again", http.StatusLoopDetected)
			return
		default:
			http.Error(w, "Bad Request: a fleet request carries at most one "+hopHeader+" header, a hop count", http.StatusBadRequest)
			return
		}
		// The fleet credential has done its job; nothing after this point
		// may mistake it for the caller's.
		r.Header.Del("Authorization")
		hw := &hopWriter{ResponseWriter: w}
		s.internal.handler.ServeHTTP(hw, r.WithContext(context.WithValue(r.Context(), hopWriterKey{}, hw)))
	})
}

// isHopCount reports whether v is a positive decimal count.
func isHopCount(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}

// routeKinds are the catalog's names of the kinds a fleet forwards, as
// Peers takes them.
const (
	kindTool     = "tool"
	kindResource = "resource"
)
