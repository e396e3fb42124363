package mcpserve

import (
	"bytes"
	"context"
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

// callerHeader is where FleetHandler puts, for the middleware that
// serves a forwarded call, the credential it judges the call with: the
// mark of the caller's credential that the forwarder asserted, never a
// token. A forwarder never sends it, and FleetHandler replaces what a
// request carries under that name.
const callerHeader = "Livereg-Fleet-Caller"

// Fleet makes a Server one of many replicas that serve one catalog (see
// the package doc's "Serving a fleet"): a tools/call, resources/read,
// prompts/get or completion/complete for a route that another replica's
// consumer holds is forwarded to that replica, which serves it through
// its own catalog, under its live owner's plan, judged on the principal
// that the forwarding replica authenticated and asserted in its signed
// request (see FleetHandler).
type Fleet struct {
	// Peers locates the replica that holds a route. package etcdfleet's
	// Replica is one. Required.
	Peers Peers
	// Identity signs this replica's requests to the others and checks
	// theirs. nil means Peers, if it implements Identity (package
	// etcdfleet's Replica does); New fails if neither. NewKeyring makes
	// a static one.
	Identity Identity
	// ReplayWindow bounds how far a forwarded request's timestamp may be
	// from the holder's clock, either way; a request's nonce is
	// remembered for as long, and a request that repeats one is refused.
	// 0 means 30 s; negative is invalid. Replicas' clocks must agree
	// within it.
	ReplayWindow time.Duration
	// MaxHopNonces bounds how many nonces the fleet handler remembers
	// within the replay window: once it is full, forwarded requests are
	// refused (503, retryable) until their nonces leave the window,
	// rather than a nonce forgotten. 0 means 1<<20 (some 60 MiB at
	// most); negative is invalid.
	MaxHopNonces int
	// Token is the fleet's shared secret, at least MinFleetTokenBytes long
	// and the same on every replica. It is never sent: it only derives
	// keys that stay on each replica, the same on all of them: the keys
	// of task IDs (fleettasks.go), of requestStates (unless
	// Options.RequestStateKey is set), and of the one-way marks of
	// callers' credentials that tasks and requestStates are bound to.
	Token string
	// PreviousTokens are earlier fleet secrets, never sent: task IDs and
	// requestStates sealed under keys derived from them are still
	// accepted while a fleet rotates its token (package etcdfleet's doc,
	// "Rotation"). A caller's credential is marked under Token alone, so
	// a task bound to an old mark is read through a replica on its
	// holder's token. Each is at least MinFleetTokenBytes.
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
	// scheme's default port. The fleet handler refuses a request signed
	// for another endpoint than this one. Empty means unknown: nothing is
	// compared, and a request signed for another replica could be
	// replayed here, once, within the replay window.
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

// fleetSide is what serving a fleet takes beyond serving a catalog: the
// forwarder, the SDK handler that answers calls forwarded here, and the
// hop's signer and verifier. Set once by startFleet, read-only after.
type fleetSide struct {
	fwd *forwarder // forwards calls for routes held elsewhere
	// tasks serves tasks across the fleet; nil when Peers is no
	// TaskHolders (fleettasks.go).
	tasks *taskIDs
	// sdk is a stateless SDK handler over the Server's own mcp.Server:
	// a forwarded call is served by the same middleware, catalog and
	// tables of calls as a local one, one HTTP request each.
	sdk    http.Handler
	path   string       // where Serve mounts FleetHandler
	sign   *hopSigner   // signs this replica's hop requests (hopsign.go)
	verify *hopVerifier // checks the ones sent here
	// onForwarded, if set, is called with the method of every request
	// forwarded here that the fast path or serveTasks serves (tests).
	onForwarded func(method string)
}

// startFleet checks opts.Fleet and, when it is set, builds what serving a
// fleet takes. Forwarded calls are served by this Server, marked as
// forwarded (forwardedMark): judged on the principal the forwarder
// asserted, and never forwarded again: a forwarded call is served
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
	case f.ReplayWindow < 0:
		return fmt.Errorf("%w: negative replay window %v", ErrInvalidOptions, f.ReplayWindow)
	case f.MaxHopNonces < 0:
		return fmt.Errorf("%w: negative MaxHopNonces %d", ErrInvalidOptions, f.MaxHopNonces)
	}
	id := f.Identity
	if id == nil {
		var ok bool
		if id, ok = f.Peers.(Identity); !ok {
			return fmt.Errorf("%w: Fleet without Identity, and its Peers (%T) is no Identity: replicas sign their requests to each other (NewKeyring)", ErrInvalidOptions, f.Peers)
		}
	}
	if f.Advertise != "" {
		if _, err := parseEndpoint(f.Advertise); err != nil {
			return fmt.Errorf("%w: advertised fleet endpoint %s: %v", ErrInvalidOptions, quote.Name(f.Advertise), err)
		}
	}
	window := cmpOr(f.ReplayWindow, defaultReplayWindow)
	sign := &hopSigner{id: id, markKey: deriveMarkKey(f.Token), auth: s.cat.Authenticator()}
	fs := &fleetSide{
		fwd:   newForwarder(f, sign, s.maxResult, s.log),
		tasks: newTaskIDs(f),
		path:  orString(f.Path, DefaultFleetPath),
		sign:  sign,
		verify: &hopVerifier{id: id, window: window, now: time.Now,
			nonces: newNonceCache(cmpOr(f.MaxHopNonces, defaultMaxHopNonces), window)},
		sdk: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
			&mcp.StreamableHTTPOptions{Stateless: true, Logger: log, MaxRequestBodyBytes: opts.MaxRequestBodyBytes}),
	}
	fs.verify.self, fs.verify.isSelf = fs.fwd.self, fs.fwd.isSelf
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

// forwardedCredential is the credential of a call forwarded here, as
// FleetHandler put it: the mark of the original caller's credential.
func forwardedCredential(ex *mcp.RequestExtra) string {
	return ex.Header.Get(callerHeader)
}

// FleetHandler returns the handler that answers calls other replicas
// forward here: mount it where this replica's advertised endpoint points
// (Serve and ListenAndServe mount it at Fleet.Path). Every request must
// be signed by a replica that Fleet.Identity verifies, for this replica's
// advertised endpoint, over its body, with a timestamp within
// Fleet.ReplayWindow and a nonce not seen within it, asserting a
// principal not yet expired (hopsign.go): 401 otherwise, naming why but
// no secret; 503 while the nonces of the window fill Fleet.MaxHopNonces.
// The call is judged on the asserted principal, until its expiry, never
// on a token. A forwarder's request carries its
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
		hc, err := s.fleet.verify.check(r.Header)
		if err != nil {
			hopRefusal(w, hc.replica, err)
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
		var body *bytes.Buffer
		if r.Method == http.MethodPost {
			var ok bool
			if body, ok = s.readBody(w, r); !ok {
				return
			}
		} else {
			body = new(bytes.Buffer)
		}
		if err := s.fleet.verify.verify(&hc, r, body.Bytes()); err != nil {
			putBuf(body)
			hopRefusal(w, hc.replica, err)
			return
		}
		// Nothing after this point may take a credential from the wire:
		// the call is judged on the asserted principal, under the mark.
		r.Header.Del("Authorization")
		caller := &hopCaller{cred: hc.assert.credential(), pr: hc.assert.principal()}
		if caller.cred == "" {
			delete(r.Header, callerHeader)
		} else {
			r.Header[callerHeader] = []string{caller.cred}
		}
		hw := &hopWriter{ResponseWriter: w}
		ctx := context.WithValue(context.WithValue(r.Context(), hopWriterKey{}, hw), hopCallerKey{}, caller)
		s.serveForwarded(hw, r.WithContext(ctx), body)
	})
}

// serveForwarded is the front of a forwarded request, once FleetHandler
// has checked the request's signature and hop count and read its body
// (empty for a request but a POST; a POST's goes back to its pool here,
// unless handed to the SDK). Of what serveHTTP
// does it keeps what holds for any request: the Origin check, the
// protocol headers and the strict decoding (decode.go), the fast path,
// the screening of a POST, its number in requestHeader, the bound
// on what the SDK echoes. It has no session to bind, reserve or end (the fleet's SDK
// handler is stateless), and asks no credential at the HTTP layer: each
// route's plan judges the caller's.
func (s *Server) serveForwarded(w http.ResponseWriter, r *http.Request, body *bytes.Buffer) {
	if err := s.checkOrigin(r); err != nil {
		http.Error(w, "Forbidden: cross-origin request from an origin not allowed", http.StatusForbidden)
		return
	}
	if !refuseRepeatedHeader(w, r) {
		return
	}
	r.Header.Del(requestHeader)
	r.Header[forwardedMark] = []string{"1"}
	if r.Method == http.MethodPost {
		if !strictBody(w, body.Bytes()) {
			putBuf(body)
			return
		}
		if tasksRequest(r) {
			// A tasks request for a task that names this replica as
			// its holder (fleettasks.go).
			defer putBuf(body)
			if s.fleet.onForwarded != nil {
				s.fleet.onForwarded(r.Header.Get(methodHeader))
			}
			// Judged on the principal the forwarder asserted, under the
			// caller's mark (dispatch.go's forwardedCaller).
			ctx, cred := s.forwardedCaller(r.Context(), &mcp.RequestExtra{Header: r.Header})
			if r = r.WithContext(ctx); s.tasksFront(w, r, cred) {
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
