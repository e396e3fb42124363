package mcpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// DefaultFleetPath is where Serve and ListenAndServe mount the fleet
// handler when Fleet.Path is empty.
const DefaultFleetPath = "/fleet"

// MinFleetTokenBytes is the shortest fleet credential New accepts.
const MinFleetTokenBytes = 16

// defaultForwardTimeout is how long a forward waits for the holder's
// response to begin when Fleet.ForwardTimeout is 0.
const defaultForwardTimeout = 5 * time.Second

// defaultMaxConnsPerPeer caps the connections the Server's own fleet
// client opens to one peer when Fleet.MaxConnsPerPeer is 0.
const defaultMaxConnsPerPeer = 64

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
// the package doc's "Serving a fleet"): a tools/call, resources/read,
// prompts/get or completion/complete for a route that another replica's
// consumer holds is forwarded to that replica, which serves it through its own catalog, with the caller's
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
	// have reached it. 0 means defaultForwardTimeout; negative is
	// invalid.
	ForwardTimeout time.Duration
	// MaxConnsPerPeer caps the connections the Server's own client opens
	// to one peer; a forward beyond the cap waits for one, within
	// ForwardTimeout. 0 means defaultMaxConnsPerPeer; negative means no
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
	// one, that holds the route of kind and name, and false when no other
	// replica is known to: a tool (catalog.KindTool) or a prompt
	// (catalog.KindPrompt) by its name, a fixed resource
	// (catalog.KindResource) by its URI, a resource template
	// (catalog.KindTemplate) by its key (catalog.TemplateKey), the names
	// a catalog claims (catalog.Claim). It is called on every request
	// for a route this replica does not hold, concurrently, and must not
	// block.
	Peer(kind catalog.Kind, name string) (endpoint string, ok bool)
}

// fleetTokenDigest is the SHA-256 of the fleet credential: comparing
// digests in constant time reveals neither the token nor its length.
type fleetTokenDigest [sha256.Size]byte

func (d *fleetTokenDigest) matches(token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], d[:]) == 1
}

// fleetSide is what serving a fleet takes beyond serving a catalog: the
// forwarder, the SDK handler that answers calls forwarded here, and the
// fleet credential's digests. Set once by startFleet, read-only after.
type fleetSide struct {
	fwd *forwarder // forwards calls for routes held elsewhere
	// tasks serves tasks across the fleet; nil when Peers is no
	// TaskHolders (fleettasks.go).
	tasks *taskIDs
	// sdk is a stateless SDK handler over the Server's own mcp.Server:
	// a forwarded call is served by the same middleware, catalog and
	// tables of calls as a local one, one HTTP request each.
	sdk      http.Handler
	path     string             // where Serve mounts FleetHandler
	token    fleetTokenDigest   // the fleet credential's digest
	previous []fleetTokenDigest // Fleet.PreviousTokens' digests, also accepted
	// onForwarded, if set, is called with the method of every request
	// forwarded here that the fast path or serveTasks serves (tests).
	onForwarded func(method string)
}

// startFleet checks opts.Fleet and, when it is set, builds what serving a
// fleet takes. Forwarded calls are served by this Server, marked as
// forwarded (forwardedMark): with the caller's credential from
// callerHeader, and never forwarded again: a forwarded call is served
// here or not at all, so a call can cross at most one hop, whatever the
// replicas' views say.
func (s *Server) startFleet(opts Options, log *slog.Logger) error {
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
	case f.Path != "" && (f.Path[0] != '/' || f.Path == s.http.path):
		return fmt.Errorf("%w: fleet path %s is not an absolute URL path apart from Path", ErrInvalidOptions, quote.Name(f.Path))
	case f.ForwardTimeout < 0:
		return fmt.Errorf("%w: negative forward timeout %v", ErrInvalidOptions, f.ForwardTimeout)
	}
	if f.Advertise != "" {
		if _, err := parseEndpoint(f.Advertise); err != nil {
			return fmt.Errorf("%w: advertised fleet endpoint %s: %v", ErrInvalidOptions, quote.Name(f.Advertise), err)
		}
	}
	fs := &fleetSide{
		fwd:   newForwarder(f, s.maxResult, s.log),
		tasks: newTaskIDs(f),
		path:  orString(f.Path, DefaultFleetPath),
		token: sha256.Sum256([]byte(f.Token)),
		sdk: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
			&mcp.StreamableHTTPOptions{Stateless: true, Logger: log, MaxRequestBodyBytes: opts.MaxRequestBodyBytes}),
	}
	for _, t := range f.PreviousTokens {
		fs.previous = append(fs.previous, sha256.Sum256([]byte(t)))
	}
	fs.fwd.tasks = fs.tasks != nil
	s.fleet = fs
	return nil
}

// forwardedMark marks, from FleetHandler to the receiving middleware, a
// message that another replica forwarded here. Both fronts delete what a
// client sent under that name, so the mark cannot be forged. It is in
// canonical form: read straight from the header map, it costs a local
// call one map lookup.
const forwardedMark = "Livereg-Internal-Forwarded"

// isForwarded reports whether the message with extra ex came through
// FleetHandler.
func isForwarded(ex *mcp.RequestExtra) bool {
	return ex != nil && len(ex.Header[forwardedMark]) > 0
}

// sessionless reports whether the message with extra ex came through the
// stateless handler of a stateful server (sessionlessMark).
func sessionless(ex *mcp.RequestExtra) bool {
	return ex != nil && len(ex.Header[sessionlessMark]) > 0
}

// forwardedCredential is the credential of a call forwarded here: what
// the original caller presented on the replica that forwarded it.
func forwardedCredential(ex *mcp.RequestExtra) string {
	return ex.Header.Get(callerHeader)
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
		if s.fleet == nil {
			http.NotFound(w, r)
			return
		}
		if len(r.Header.Values("Authorization")) > 1 {
			http.Error(w, "Bad Request: more than one Authorization header", http.StatusBadRequest)
			return
		}
		if tok := bearer(r.Header); !s.fleet.token.matches(tok) &&
			!slices.ContainsFunc(s.fleet.previous, func(d fleetTokenDigest) bool { return d.matches(tok) }) {
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
		s.serveForwarded(hw, r.WithContext(context.WithValue(r.Context(), hopWriterKey{}, hw)))
	})
}

// serveForwarded is the front of a forwarded request, once FleetHandler
// has checked the fleet credential and the hop count. Of what serveHTTP
// does it keeps what holds for any request: the Origin check, the fast
// path, the screening of a POST, its number in requestHeader, the bound
// on what the SDK echoes. It has no session to bind, reserve or end (the fleet's SDK
// handler is stateless), and asks no credential at the HTTP layer: each
// route's plan judges the caller's.
func (s *Server) serveForwarded(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		http.Error(w, "Forbidden: cross-origin request from an origin not allowed", http.StatusForbidden)
		return
	}
	r.Header.Del(requestHeader)
	r.Header[forwardedMark] = []string{"1"}
	if r.Method == http.MethodPost {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		if tasksRequest(r) {
			// A tasks request for a task that names this replica as
			// its holder (fleettasks.go).
			defer putBuf(body)
			if s.fleet.onForwarded != nil {
				s.fleet.onForwarded(r.Header.Get(methodHeader))
			}
			if cred := forwardedCredential(&mcp.RequestExtra{Header: r.Header}); s.tasksFront(w, r, cred) {
				s.serveTasks(w, r, body.Bytes(), cred, true)
			}
			return
		}
		if startsTasks(r) {
			r = withClient(r, addrClient(r)) // taskfront.go
		}
		if fr, ok := s.fastTake(r, body.Bytes(), nil, true); ok {
			defer putBuf(body)
			s.fastServe(w, r, fr)
			return
		}
		if !s.screen(w, r, body.Bytes()) {
			return
		}
		n, done := s.calls.openRequest(r.Context(), "", s.clientOf(r, ""), nil, nil)
		defer done()
		r.Header.Set(requestHeader, n)
	}
	eb := &echoBound{ResponseWriter: w}
	defer eb.finish()
	s.fleet.sdk.ServeHTTP(eb, r)
}

// isHopCount reports whether v is a positive decimal count.
func isHopCount(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}
