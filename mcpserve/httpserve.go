package mcpserve

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// ListenAndServe listens on the TCP address addr and serves the streamable
// HTTP handler at Options.Path (every path if empty) until ctx ends. See
// Serve: it refuses a non-loopback address without an authenticator.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if err := checkListenAddress(ctx, addr, s.http.auth); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Serve serves the streamable HTTP handler on ln, at Options.Path (every
// path if empty), until ctx ends, then shuts
// down gracefully: it stops accepting connections, waits for the HTTP
// requests that carry client messages (each lasts until its responses are
// delivered, so in-flight calls finish and answer), then closes every
// session of the server, which ends the standalone SSE streams. The
// subscriptions/listen streams of 2026-07-28 clients are ended first, and
// new ones refused while the shutdown lasts. The whole
// shutdown takes at most Options.ShutdownTimeout, whatever route bodies
// do: the calls still in flight then have their contexts ended, and
// whatever is still open is closed. Serve returns nil after a shutdown
// that ctx asked for, the listener's error if serving failed before, and
// ErrClosed after Close.
// It closes ln. One Server may serve several listeners at once, but a
// shutdown closes all of the Server's sessions, whichever listener or
// transport they came through.
//
// Serve fails closed: if ln is a TCP listener bound to an address that is
// not loopback and no authenticator is configured, it closes ln and returns
// an error wrapping ErrExposed without serving a request. With an
// authenticator it logs a warning and serves. Unix-socket listeners count as
// local.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.closed.Load() {
		_ = ln.Close()
		return ErrClosed
	}
	if err := checkExposure(ln.Addr(), s.http.auth); err != nil {
		_ = ln.Close()
		return err
	}
	if !isLocal(ln.Addr()) {
		msg := "mcpserve: serving on a non-loopback address; every HTTP request, initialize included, needs a bearer token"
		if s.http.policy == CredentialPerRoute {
			msg = "mcpserve: serving on a non-loopback address; every non-public route needs a bearer token"
		}
		s.log.Warn(msg, "addr", ln.Addr().String())
	}
	// Beyond loopback, CredentialAuto asks every request for a credential.
	var h = s.front(!isLocal(ln.Addr()))
	if s.http.path != "" || s.fleet != nil {
		mux := http.NewServeMux()
		mux.Handle(cmp.Or(s.http.path, "/"), h)
		if s.fleet != nil {
			mux.Handle(s.fleet.path, s.FleetHandler())
		}
		h = mux
	}
	var posts inflight
	hs := s.httpServer(posts.track(h))
	hs.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.log.Info("mcpserve: shutting down", "addr", ln.Addr().String())
	// A subscriptions/listen stream is a POST that lasts until its client
	// cancels it: end the streams now, so that the drain below waits for
	// calls rather than for them, and refuse new ones until the shutdown
	// is over.
	s.listens.endAll(errShuttingDown, false)
	defer s.listens.undrain()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.grace)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	select {
	case <-posts.drain():
	case <-sctx.Done():
	}
	// In-flight calls had the grace to finish; those still running now
	// have their contexts ended, and the close waits no longer than the
	// grace whatever their bodies do.
	closed := make(chan struct{})
	go func() {
		s.closeSessions(sctx, errSessionEnded, false)
		close(closed)
	}()
	select {
	case <-closed:
	case <-sctx.Done():
	}
	// Every request that carried a message has ended or had its grace, and
	// every session is closed, which ends the standalone streams. What
	// connections remain carry nothing a client waits for; but net/http
	// counts one that never sent a request (a peer's spare keep-alive
	// connection, say) as active for its first 5 s, and Shutdown would
	// wait for it. Close them.
	if sctx.Err() != nil {
		s.log.Warn("mcpserve: graceful shutdown incomplete; closing connections", "err", sctx.Err())
	}
	_ = hs.Close()
	<-shut
	<-served // http.ErrServerClosed
	return nil
}

// inflight counts the requests of an HTTP server other than GETs (which
// hold standalone SSE streams open for as long as a session lives).
type inflight struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed once draining with n == 0
}

func (f *inflight) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer f.leave()
		h.ServeHTTP(w, r)
	})
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	f.signal()
}

// drain returns a channel closed once no tracked request is open.
func (f *inflight) drain() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	f.draining = true
	f.signal()
	return f.idle
}

func (f *inflight) signal() {
	if f.draining && f.n == 0 {
		select {
		case <-f.idle:
		default:
			close(f.idle)
		}
	}
}
