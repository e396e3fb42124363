package mcpserve

import (
	"context"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures a Server, one field per decision, grouped by the
// part of the server that reads it. The zero Options is valid.
type Options struct {
	// Identity and logs.

	// Name and Version identify the server to clients (serverInfo).
	// Empty means "livereg" and "dev".
	Name, Version string
	// Instructions, if set, are sent to clients in the initialize result.
	Instructions string
	// Logger receives the server's structured logs and the SDK's. nil
	// means slog.Default().
	Logger *slog.Logger

	// Dispatch: what one call may cost and present.

	// PageSize is how many tools or resources one list page holds. 0 means
	// the SDK's own default, mcp.DefaultPageSize (1,000), so that a client
	// walks a listing in as many round trips as it would with tools added
	// to the SDK directly; negative is invalid.
	PageSize int
	// MaxResultBytes bounds the size of one tools/call or resources/read
	// result, counted as the bytes of its text, of its binary data once
	// base64-encoded, and of its structured content once JSON-encoded. A
	// larger result is not sent: the client gets an error that states the
	// limit, and the server logs it. A result forwarded from another
	// replica of a fleet is counted, and refused, the same way here, and
	// read through a limit derived from this one (see the package doc's
	// "Serving a fleet"). 0 means 16 MiB; negative is invalid.
	MaxResultBytes int64
	// ListTTL is the caching hint (ttlMs, MCP 2026-07-28) on the four
	// listings and on server/discover: how long a client may use one
	// before it asks again. The listings are the same for every caller,
	// so their cacheScope is "public". 0, the default, marks them stale at
	// once: a consumer's routes come and go with its liveness, and a
	// listing a client kept after the consumer died would go on
	// advertising its routes, which ADR-0068 rules out. A client on a
	// session or a subscriptions/listen stream hears every change as
	// list_changed, so a server whose clients keep one, or whose catalog
	// rarely changes, may set a long one; a client that calls a route
	// gone meanwhile gets the usual clean error. Truncated to
	// milliseconds; negative is invalid. A resources/read carries the
	// hint its reader gives (catalog.Contents.CacheTTL).
	ListTTL time.Duration
	// RequestStateKey seals the requestState of input_required results
	// (MCP 2026-07-28), which binds a call's later rounds to its route's
	// consumer, its caller and the answers so far (see the package doc's
	// "Input rounds"): at least MinRequestStateKeyBytes of secret. nil
	// means a key derived from Fleet.Token (and PreviousTokens) when the
	// Server serves a fleet, which every replica then shares, and a random
	// key of the Server's own otherwise, so that a restarted server
	// refuses its predecessor's states, as it would their consumers.
	// Replicas behind one load balancer without a Fleet need one key.
	RequestStateKey []byte
	// RequestStateTTL is how long a requestState is accepted after the
	// round that issued it: a later retry is -32602
	// invalid_request_state, and the client starts the call afresh. It
	// bounds how long a state that leaked can be replayed (the state is
	// also bound to the caller, the route and the call's arguments). 0
	// means DefaultRequestStateTTL; negative is invalid. The state carries
	// its expiry, so the TTL of the server that issued it applies; servers
	// that share a key need clocks that agree within a small part of it.
	RequestStateTTL time.Duration
	// TransportCredential, if set, gives the credential of a request on a
	// session served by ServeTransport or ServeStdio, which carry no HTTP
	// headers: without it such sessions present none. It runs on every
	// tools/call, resources/read, prompts/get, resources/subscribe and
	// subscriptions/listen of those sessions and must be safe for
	// concurrent use. HTTP requests always present their
	// bearer token (the Authorization header), which RequireCredential
	// and the session binding judge.
	TransportCredential func(ctx context.Context, req mcp.Request) string
	// ShutdownTimeout bounds how long ListenAndServe and Serve wait for
	// in-flight requests after their context ends, and how long Close and
	// ServeTransport wait for sessions to close. 0 means 5 seconds.
	ShutdownTimeout time.Duration

	// Notifications and streams.

	// NotifyWindow is the coalescing window of list_changed notifications:
	// after one notification of a kind, the next one waits at least this
	// long, and carries every change made meanwhile. 0 means
	// 50 ms; a value below 20 ms is raised to it; negative is invalid.
	NotifyWindow time.Duration
	// MaxListenStreams caps the subscriptions/listen streams open at once,
	// whatever transport carries them. At the cap a listen gets JSON-RPC
	// error CodeOverloaded ([errTooManyListenStreams]) and open streams
	// are untouched. 0 means 1,000; negative means no cap.
	MaxListenStreams int
	// MaxSubscriptionsPerSession caps the resource subscriptions one
	// session holds. Beyond it a resources/subscribe to a new URI gets
	// JSON-RPC error CodeOverloaded ([errTooManySubscriptions], reason
	// "too_many_subscriptions") and changes nothing. 0 means
	// 256; negative means no cap.
	MaxSubscriptionsPerSession int
	// MaxSubscriptions caps the resource subscriptions of all sessions
	// together, split between clients by ClientShare and AnonymousShare;
	// beyond it, or a client's share of it, a resources/subscribe is
	// refused as beyond MaxSubscriptionsPerSession. 0 means
	// 16,384; negative means no cap.
	MaxSubscriptions int

	// The HTTP front: sessions, credentials, shares and bounds.

	// Path is where ListenAndServe and Serve mount the handler, "/mcp" by
	// convention; other paths get 404. Empty means every path.
	Path string
	// Stateless serves streamable HTTP without sessions, which the MCP
	// revision 2026-07-28 (ProtocolStateless) needs: see the package doc's
	// "Stateless mode". Options that only sessions give a meaning to
	// (a positive SessionTimeout or MaxSessions, an EventStore) are then
	// ErrInvalidOptions.
	Stateless bool
	// SessionTimeout closes an HTTP session that received no request for
	// this long (a call in progress counts as activity; an open standalone
	// stream does not). 0 means 10 minutes; negative means never.
	SessionTimeout time.Duration
	// MaxSessions caps the HTTP sessions held at once. At the cap an
	// initialize gets HTTP 503 with Retry-After ([errTooManySessions]) and
	// live sessions are untouched. 0 means 1,000; negative means no cap.
	MaxSessions int
	// RequireCredential says which HTTP requests, initialize included,
	// must carry a bearer token the catalog's authenticator accepts; the
	// zero value requires one beyond loopback (see CredentialAuto).
	RequireCredential CredentialPolicy
	// AllowedOrigins lists the browser origins ("https://app.example")
	// whose cross-origin requests are served. Any other cross-origin
	// request gets 403, as the transport specification asks.
	AllowedOrigins []string
	// ClientShare is the fraction of each cap (MaxSessions,
	// MaxListenStreams, MaxSubscriptions) that one client may hold, rounded
	// up and at least one: a client over its share is refused as at the
	// cap (wrapping [errOverShare]) while other clients are still served.
	// A client is the subject its bearer token authenticates as, or else
	// its remote IP address (so clients behind one proxy or NAT share
	// theirs); sessions over stdio or in memory hold no share. 0 means 1/4; 1 turns the
	// per-client bound off; outside [0, 1] is invalid. A cap that is off has no shares.
	ClientShare float64
	// AnonymousShare is the fraction of each cap that the clients
	// without a valid credential hold together, when the catalog has an
	// authenticator (without one every client is anonymous, and only
	// ClientShare applies). 0 means 1/2; 1 turns it off; outside [0, 1] is invalid.
	AnonymousShare float64
	// Limits are the HTTP server timeouts and sizes Serve and
	// ListenAndServe apply; the zero value is the defaults.
	Limits Limits
	// MaxRequestBodyBytes bounds the body of one HTTP request, in Handler
	// as in Serve; past it the answer is 413. 0 means
	// mcp.DefaultMaxRequestBodyBytes; negative means no bound.
	MaxRequestBodyBytes int64
	// EventStore, if set, keeps the messages of each session's streams so
	// that a client that lost a stream resumes it (Last-Event-ID). nil
	// keeps nothing, as the SDK's handler does by default.
	EventStore mcp.EventStore
	// JSONResponse answers a POST with one application/json body instead
	// of a server-sent event stream, as the SDK's option of that name.
	JSONResponse bool
	// DisableLocalhostProtection turns off the SDK's DNS-rebinding
	// protection, which refuses requests with a non-loopback Host header
	// on a loopback listener. Leave it off unless a proxy on this machine
	// forwards requests with the public host name.
	DisableLocalhostProtection bool

	// The fleet.

	// Fleet, if set, makes the server one replica of a fleet: calls for
	// routes other replicas hold are forwarded to them, and
	// FleetHandler answers the calls they forward here (see the package
	// doc's "Serving a fleet"). nil serves this catalog's routes alone.
	Fleet *Fleet
}
