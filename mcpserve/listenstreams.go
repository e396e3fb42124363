package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// defaultMaxListenStreams caps the subscriptions/listen streams open at
// once. An open stream holds an HTTP request, its connection, a session of
// the SDK and a parked goroutine, a few tens of KB in all, so the cap
// bounds them near the sessions' own (defaultMaxSessions).
const defaultMaxListenStreams = 1000

// methodSubscriptionsListen is the 2026-07-28 request that opens a stream
// of list_changed notifications; it lasts until the client cancels it or
// the server ends it.
const methodSubscriptionsListen = "subscriptions/listen"

// Errors of listen streams; match them with errors.Is.
var (
	// errTooManyListenStreams: a subscriptions/listen arrived while
	// Options.MaxListenStreams streams were open. The client gets JSON-RPC
	// error CodeOverloaded with data {"reason":"too_many_listen_streams",
	// "retryable":true}; open streams are untouched.
	errTooManyListenStreams = errors.New("mcpserve: listen stream limit reached")
	// errShuttingDown ends the listen streams of a graceful shutdown, and
	// refuses those that arrive during it.
	errShuttingDown = errors.New("mcpserve: server shutting down")
)

// listenStreams counts and ends the open subscriptions/listen streams of a
// Server, whatever transport carries them. All methods are safe for
// concurrent use; opening and ending a stream cost one mutex and a few
// atomic operations.
type listenStreams struct {
	max    int64 // <= 0: unlimited
	shares *shares
	open   atomic.Int64
	opened atomic.Uint64

	mu       sync.Mutex
	closed   bool // Close: refuse every later stream
	draining int  // graceful shutdowns in progress: refuse new streams
	live     map[*context.CancelCauseFunc]struct{}
}

func newListenStreams(max int, sh *shares) *listenStreams {
	return &listenStreams{max: int64(max), shares: sh, live: map[*context.CancelCauseFunc]struct{}{}}
}

// start admits a stream: it returns the context the SDK's listen handler
// parks on (ended by endAll, or when ctx ends) and the function to call
// once the handler returned. At the cap, or while the server closes or
// shuts down, it returns an error wrapping errTooManyListenStreams,
// ErrClosed or errShuttingDown and admits nothing; over cl's share of the
// cap, one wrapping both errTooManyListenStreams and errOverShare.
func (l *listenStreams) start(ctx context.Context, cl client) (context.Context, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, nil, ErrClosed
	case l.draining > 0:
		return nil, nil, errShuttingDown
	case !l.shares.take(cl):
		return nil, nil, fmt.Errorf("%w: %w (%d streams)", errTooManyListenStreams, errOverShare, l.shares.perClient)
	case l.max > 0 && l.open.Load() >= l.max:
		l.shares.give(cl)
		return nil, nil, fmt.Errorf("%w (%d streams)", errTooManyListenStreams, l.max)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	l.live[&cancel] = struct{}{}
	l.open.Add(1)
	l.opened.Add(1)
	return lctx, func() {
		l.mu.Lock()
		delete(l.live, &cancel)
		l.mu.Unlock()
		l.open.Add(-1)
		l.shares.give(cl)
		cancel(nil)
	}, nil
}

// endAll ends every open stream with cause. With closing set, every later
// stream is refused; otherwise later streams are refused until undrain.
func (l *listenStreams) endAll(cause error, closing bool) {
	l.mu.Lock()
	if closing {
		l.closed = true
	} else {
		l.draining++
	}
	all := make([]*context.CancelCauseFunc, 0, len(l.live))
	for f := range l.live {
		all = append(all, f)
	}
	l.mu.Unlock()
	for _, f := range all {
		(*f)(cause)
	}
}

// undrain ends the refusal that endAll without closing began.
func (l *listenStreams) undrain() {
	l.mu.Lock()
	l.draining--
	l.mu.Unlock()
}

// receiveListen is the receiving middleware that holds subscriptions/listen
// to Options.MaxListenStreams and lets the server end the streams: the
// SDK's handler parks on its context until the client cancels, and ending
// that context makes it answer, which ends the stream (its HTTP POST, over
// streamable HTTP). Every other method passes through untouched.
func (s *Server) receiveListen(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodSubscriptionsListen {
			return next(ctx, method, req)
		}
		lctx, done, err := s.listens.start(ctx, s.requestClient(req))
		if err != nil {
			return nil, s.refuseListen(err)
		}
		defer done()
		// The SDK subscribes to the stream's resources with requests of
		// its own, which carry no extra: they present the stream's
		// credential to the routes' plans (subjudge.go).
		// The context vouches for the credential (a mark in a fleet:
		// dispatch.go's credential), for the plans that judge it.
		vctx, cred := s.credential(lctx, req)
		lctx = context.WithValue(vctx, listenCredKey{}, cred)
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && isForwarded(req.GetExtra()) && !isCheck(req.GetExtra().Header) {
			// Another replica's stream of its subscriptions here
			// (fleetsubs.go): the table ends it when it drops one of
			// its URIs. A check of one caller's subscribe
			// (fleetsubjudge.go) is judged as a client's own instead.
			var end context.CancelCauseFunc
			lctx, end = context.WithCancelCause(lctx)
			defer s.subs.trackPeerStream(ss, end)()
		}
		if lt := s.requestTasks(req); lt != nil {
			return s.serveTaskListen(lctx, lt, next, method, req)
		}
		return next(lctx, method, req)
	}
}

// refuseListen is the JSON-RPC error of a refused subscriptions/listen:
// CodeOverloaded, as for a route at its concurrency limit, since the client
// should back off and retry (this server or another replica) rather than
// give up.
func (s *Server) refuseListen(err error) error {
	reason := "shutting_down"
	if errors.Is(err, errTooManyListenStreams) {
		reason = "too_many_listen_streams"
		why, limit := reasonCap, s.listens.max
		if errors.Is(err, errOverShare) {
			why, limit = reasonShare, s.listens.shares.perClient
		}
		s.refused.listens.refused(s.log, why, limit)
	}
	data, _ := json.Marshal(map[string]any{"reason": reason, "retryable": true})
	return &jsonrpc.Error{Code: CodeOverloaded, Message: err.Error() + "; retry later", Data: data}
}
