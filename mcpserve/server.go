package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// defaultName and defaultVersion identify the server in initialize
// results when Options leaves them empty.
const (
	defaultName    = "livereg"
	defaultVersion = "dev"
)

// Defaults for a zero Options.
const (
	// defaultNotifyWindow is the coalescing window of list_changed
	// notifications.
	defaultNotifyWindow = 50 * time.Millisecond
	// minNotifyWindow is the shortest window accepted. The SDK debounces
	// its own sends by 10ms and restarts that delay on every change, so a
	// shorter window could postpone a notification for as long as a storm
	// lasts.
	minNotifyWindow = 20 * time.Millisecond
	// defaultShutdownTimeout bounds the graceful part of a shutdown, and
	// how long Close waits for sessions to close.
	defaultShutdownTimeout = 5 * time.Second
	// defaultMaxResultBytes is the default bound on one result's size.
	defaultMaxResultBytes = 16 << 20
)

// JSON-RPC error codes of this package, in the range JSON-RPC reserves for
// implementation-defined server errors, clear of the codes the SDK and the
// MCP specification use there (-32001 to -32005, -32020 to -32022, -32042).
// The last digits recall the HTTP statuses 403 and 429. Where the MCP
// specification fixes a code (-32602 for unknown tools and resources) that
// code is used.
const (
	// CodeDenied: a resources/read refused by the resource's plan. (A denied
	// tools/call is a tool result with isError instead.)
	CodeDenied int64 = -32043
	// CodeOverloaded: every slot of a route with a concurrency limit was
	// taken and its waiting room full; retry later.
	CodeOverloaded int64 = -32029
)

// Errors returned by this package; match them with errors.Is.
var (
	// ErrExposed: Serve or ListenAndServe was asked to listen on an address
	// that is not loopback while no authenticator is configured. Configure
	// catalog.Config.Authenticator or listen on
	// 127.0.0.1, [::1] or localhost.
	ErrExposed = errors.New("mcpserve: refusing to serve on a non-loopback address without an authenticator")
	// ErrInvalidOptions: New was given a nil catalog or an out-of-range
	// option.
	ErrInvalidOptions = errors.New("mcpserve: invalid options")
	// ErrClosed: the Server was closed.
	ErrClosed = errors.New("mcpserve: server closed")
)

// Server serves one catalog over MCP. It is safe for concurrent use. Make
// it with New and stop its notification goroutine with Close.
type Server struct {
	cat       *catalog.Catalog
	mcp       *mcp.Server
	impl      *mcp.Implementation // the server's name, in 2026-07-28 results
	log       *slog.Logger
	cred      func(ctx context.Context, req mcp.Request) string // Options.TransportCredential
	page      int
	listCache mcp.Cacheable // Options.ListTTL, public
	grace     time.Duration
	maxResult int64

	calls   *calls         // calls in flight and their sessions (calls.go)
	note    *notifier      // list_changed (notify.go)
	subs    *subscriptions // resource subscriptions (subscribe.go)
	listens *listenStreams // subscriptions/listen streams (listenstreams.go)
	refused *refusalCounts // refusals by cap and reason (shares.go)

	http  httpFront // the HTTP front (front.go)
	lists listCache // the fast path's listing pages (fastlist.go)
	// params: the tools of the last listing that mark arguments for
	// headers (paramheaders.go)
	params atomic.Pointer[paramTools]
	fleet  *fleetSide // serving a fleet (fleet.go); nil without Options.Fleet
	// roundKeys seal and open requestStates (roundstate.go).
	roundKeys *roundKeys

	closeOnce sync.Once
	closed    atomic.Bool
}

// New makes a Server for cat and starts its notification goroutine. It
// returns ErrInvalidOptions for a nil catalog or a negative option.
func New(cat *catalog.Catalog, opts Options) (*Server, error) {
	if cat == nil {
		return nil, fmt.Errorf("%w: nil catalog", ErrInvalidOptions)
	}
	window, err := notifyWindow(opts.NotifyWindow)
	if err != nil {
		return nil, err
	}
	return newServer(cat, opts, timerWindow(window))
}

func notifyWindow(d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, fmt.Errorf("%w: negative notify window %v", ErrInvalidOptions, d)
	case d == 0:
		return defaultNotifyWindow, nil
	}
	return max(d, minNotifyWindow), nil
}

// newServer is New with the coalescing wait given, so that tests can hold a
// window open for as long as they like.
func newServer(cat *catalog.Catalog, opts Options, window func(stop <-chan struct{}) bool) (*Server, error) {
	if opts.PageSize < 0 || opts.ShutdownTimeout < 0 || opts.MaxResultBytes < 0 || opts.ListTTL < 0 {
		return nil, fmt.Errorf("%w: negative page size, shutdown timeout, result limit or list TTL", ErrInvalidOptions)
	}
	if opts.Path != "" && (!strings.HasPrefix(opts.Path, "/") || strings.ContainsAny(opts.Path, "{} \t")) {
		return nil, fmt.Errorf("%w: path %q is not an absolute URL path", ErrInvalidOptions, opts.Path)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// Everything logged through this package and the SDK goes through
	// the redaction of session IDs: the SDK logs them at INFO, and a
	// session ID is all it takes to use an unbound session.
	log = slog.New(redactSessionIDs(log.Handler()))
	subs := newSubscriptions(cat, log)
	sdkLog := sdkLogger(log)
	srv := sdkServer(cat, opts, sdkLog, subs)
	hopts := httpOptions(opts, log)
	if err := resolveStateless(opts, hopts); err != nil {
		return nil, err
	}
	auth := bindsec.Configured(cat.Authenticator())
	clientShare, anonShare, err := shareOptions(opts)
	if err != nil {
		return nil, err
	}
	keys, err := newRoundKeys(opts)
	if err != nil {
		return nil, err
	}
	maxListens := cmpOr(opts.MaxListenStreams, defaultMaxListenStreams)
	s := &Server{
		roundKeys: keys,
		cat:       cat,
		mcp:       srv,
		impl:      &mcp.Implementation{Name: orString(opts.Name, defaultName), Version: orString(opts.Version, defaultVersion)},
		log:       log,
		cred:      opts.TransportCredential,
		page:      cmpOr(opts.PageSize, mcp.DefaultPageSize),
		listCache: cacheHint(opts.ListTTL, true),
		grace:     cmpOr(opts.ShutdownTimeout, defaultShutdownTimeout),
		maxResult: cmpOr(opts.MaxResultBytes, defaultMaxResultBytes),
		calls:     newCalls(hopts.Stateless),
		listens:   newListenStreams(maxListens, newShares(maxListens, clientShare, anonShare, auth)),
		refused:   newRefusalCounts(),
	}
	if err := s.http.resolve(opts, hopts, auth, clientShare, anonShare); err != nil {
		return nil, err
	}
	s.subs = subs
	subs.credOf = s.credential
	subs.readError = func(ctx context.Context, uri string, err error) error { return s.resourceError(ctx, uri, err, false) }
	subs.limit(opts, clientShare, anonShare, auth, s.refused, s.requestClient)
	if err := s.startFleet(opts, sdkLog); err != nil {
		return nil, err
	}
	if s.fleet != nil {
		subs.fleet = newFleetSubs(subs, opts.Fleet, s.fleet.fwd, log)
	}
	srv.AddReceivingMiddleware(s.receive)
	srv.AddReceivingMiddleware(s.receiveListen)
	// Last, so outermost: it sees every request first and every error last.
	srv.AddReceivingMiddleware(s.hygiene)
	srv.AddSendingMiddleware(s.sendListenAck)
	s.http.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, hopts)
	if !hopts.Stateless {
		s.http.current = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
			Stateless: true, JSONResponse: hopts.JSONResponse, Logger: hopts.Logger,
			DisableLocalhostProtection: hopts.DisableLocalhostProtection, MaxRequestBodyBytes: hopts.MaxRequestBodyBytes,
		})
	}
	s.http.handler = s.front(false)
	s.note = newNotifier(cat, window, s.toolsChanged, s.resourcesChanged)
	s.startSurface()
	go s.note.run()
	return s, nil
}

// sdkServer makes the SDK server that s's middleware answers through.
func sdkServer(cat *catalog.Catalog, opts Options, log *slog.Logger, subs *subscriptions) *mcp.Server {
	impl := &mcp.Implementation{Name: orString(opts.Name, defaultName), Version: orString(opts.Version, defaultVersion)}
	discover := cacheHint(opts.ListTTL, true)
	return mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: opts.Instructions,
		// The SDK answers server/discover; every other cacheable result
		// is this package's, its hint set where it is made.
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			if _, ok := req.(*mcp.ServerRequest[*mcp.DiscoverParams]); ok {
				*c = discover
			}
		},
		Logger:             log,
		SubscribeHandler:   subs.subscribe,
		UnsubscribeHandler: subs.unsubscribe,
		// Advertised from the start, also while the catalog is empty:
		// the SDK would only infer them from its own (unused) tables.
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:     promptCapabilities(cat),
			Completions: completionCapabilities(cat),
			// Route bodies log to the client (catalog.Call.Log).
			//lint:ignore SA1019 deprecated as of protocol 2026-07-28, still served to the clients that use it.
			Logging: &mcp.LoggingCapabilities{},
			// Tools run as tasks for the clients that negotiate it
			// (tasks.go).
			Extensions: map[string]any{extTasks: map[string]any{}},
		},
	})
}

// httpOptions are the options of the SDK's streamable HTTP handler, each
// from the one Options field that decides it.
func httpOptions(opts Options, log *slog.Logger) *mcp.StreamableHTTPOptions {
	return &mcp.StreamableHTTPOptions{
		Stateless:                  opts.Stateless,
		JSONResponse:               opts.JSONResponse,
		Logger:                     log,
		EventStore:                 opts.EventStore,
		SessionTimeout:             sessionTimeout(opts.SessionTimeout),
		DisableLocalhostProtection: opts.DisableLocalhostProtection,
		MaxRequestBodyBytes:        opts.MaxRequestBodyBytes,
	}
}

// maxBody resolves StreamableHTTPOptions.MaxRequestBodyBytes as the SDK
// does: 0 is its default, negative none.
func maxBody(n int64) int64 {
	switch {
	case n == 0:
		return mcp.DefaultMaxRequestBodyBytes
	case n < 0:
		return 0
	}
	return n
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cmpOr[T time.Duration | int64 | int](d, def T) T {
	if d == 0 {
		return def
	}
	return d
}

// MCP returns the underlying SDK server, to add middleware or to connect
// transports directly. Tools, resources, prompts and resource templates
// added to it are not served: the catalog answers for those.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Handler returns the streamable HTTP handler (one per Server, safe for
// concurrent use). Mount it at the endpoint path, /mcp by convention. The
// Authorization: Bearer header of each request is the credential its calls
// present to the catalog. In front of the SDK's handler it refuses a
// request with more than one Authorization header or one marked as
// forwarded by a fleet replica, enforces the session binding and ties
// each call's context to its HTTP request (see the package doc). Handler
// does no exposure check: Serve and ListenAndServe do.
func (s *Server) Handler() http.Handler { return s.http.handler }

// Close stops the notification goroutine, ends the context of every call
// in flight (and of every call that starts later), and closes every
// session of the server at once: a call still in flight may lose its
// answer (for a graceful stop, end the context of Serve first). It waits
// for the sessions to close at most Options.ShutdownTimeout, whatever
// route bodies do: a body that ignores its context keeps running, and its
// session finishes closing when it returns. It does not stop the catalog's
// consumers. Serving after Close returns ErrClosed. Close is idempotent
// and returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.note.close()
		s.subs.close()
		s.listens.endAll(ErrClosed, true)
		ctx, cancel := context.WithTimeout(context.Background(), s.grace)
		defer cancel()
		if s.fleet != nil {
			s.fleet.fwd.close()
		}
		s.closeSessions(ctx, ErrClosed, true)
	})
	return nil
}

// closeSessions ends every call in flight, closes every session, and
// waits for the closes until ctx ends. With closing set, calls that start
// later begin cancelled.
func (s *Server) closeSessions(ctx context.Context, cause error, closing bool) bool {
	s.calls.cancelAll(cause, closing)
	var all []*mcp.ServerSession
	for ss := range s.mcp.Sessions() {
		all = append(all, ss)
	}
	return s.closeBounded(ctx, all)
}

// ServeTransport serves one session over t until the peer disconnects
// (it returns what the session ended with, nil for a clean close) or ctx
// ends (it ends the session's calls, closes the session, and returns nil,
// after at most Options.ShutdownTimeout whatever route bodies do).
// Sessions served this way present no credential unless
// Options.TransportCredential gives one.
func (s *Server) ServeTransport(ctx context.Context, t mcp.Transport) error {
	if s.closed.Load() {
		return ErrClosed
	}
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		s.calls.cancelSession(ss, errSessionEnded)
		bound, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.grace)
		defer cancel()
		if s.closeBounded(bound, []*mcp.ServerSession{ss}) {
			<-ended
		}
		return nil
	}
}

// ServeStdio serves one session over the process's stdin and stdout, as an
// MCP server launched by its client. It returns when the client closes
// stdin (nil or the read error) or when ctx ends (nil). Log to stderr, never
// stdout.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeTransport(ctx, &mcp.StdioTransport{})
}
