package mcpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultFleetPath is where Serve and ListenAndServe mount the fleet
// handler when Fleet.Path is empty.
const DefaultFleetPath = "/fleet"

// MinFleetTokenBytes is the shortest fleet credential New accepts.
const MinFleetTokenBytes = 16

// CodePeerUnavailable is the JSON-RPC error code of a call forwarded to the
// replica that holds its route when that replica cannot be reached, with
// data {"reason":"peer_unavailable","retryable":R}. R is true when the
// request surely never reached the peer (it refused the connection, say),
// so the route's body did not run; false when the connection failed after
// the request may have been delivered.
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
	// HTTPClient carries forwarded requests. nil means a client of the
	// Server's own, which keeps up to 64 idle connections per peer.
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
// stateless, with the caller's credential from callerHeader, and never
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
		return fmt.Errorf("%w: fleet path %q is not an absolute URL path apart from Path", ErrInvalidOptions, f.Path)
	}
	internal, err := newServer(s.cat, Options{
		Name:              opts.Name,
		Version:           opts.Version,
		Logger:            opts.Logger,
		Stateless:         true,
		Credential:        forwardedCredential,
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
	s.fwd = newForwarder(f, s.log)
	return nil
}

// forwardedCredential is the internal server's credential: what the
// original caller presented on the replica that forwarded the call.
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
// more than one Authorization header); it is then served by this replica's
// catalog alone, never forwarded again. Without Options.Fleet it answers
// 404.
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
		// The fleet credential has done its job; nothing after this point
		// may mistake it for the caller's.
		r.Header.Del("Authorization")
		s.internal.handler.ServeHTTP(w, r)
	})
}

// routeKinds are the catalog's names of the kinds a fleet forwards, as
// Peers takes them.
const (
	kindTool     = "tool"
	kindResource = "resource"
)
