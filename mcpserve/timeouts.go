package mcpserve

import (
	"fmt"
	"net/http"
	"time"
)

// The defaults of Limits.
const (
	defaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 30 * time.Second
	defaultWriteTimeout      = 30 * time.Second
	defaultIdleTimeout       = 2 * time.Minute
	defaultMaxHeaderBytes    = 64 << 10
)

// Limits are the HTTP server's timeouts and sizes that Serve and
// ListenAndServe apply. A zero field means its default; a negative one
// turns the bound off. Handler applies none of them: mount it in an
// http.Server of your own with bounds of your choosing.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers: 10 seconds
	// by default.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, so that
	// a body trickled in byte by byte cannot hold a connection: 30
	// seconds by default.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response, not the whole
	// response: a standalone SSE stream lives as long as its session and
	// a call's response waits as long as the call, but a client that
	// stops reading is cut off once one write has waited this long. 30
	// seconds by default.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long: 2
	// minutes by default.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers: 64 KiB by default (Go's
	// own default is 1 MB).
	MaxHeaderBytes int
}

func (l Limits) resolve() (Limits, error) {
	pick := func(d, def time.Duration) time.Duration {
		if d < 0 {
			return 0 // net/http: zero is no bound
		}
		return cmpOr(d, def)
	}
	out := Limits{
		ReadHeaderTimeout: pick(l.ReadHeaderTimeout, defaultReadHeaderTimeout),
		ReadTimeout:       pick(l.ReadTimeout, defaultReadTimeout),
		WriteTimeout:      pick(l.WriteTimeout, defaultWriteTimeout),
		IdleTimeout:       pick(l.IdleTimeout, defaultIdleTimeout),
		MaxHeaderBytes:    cmpOr(l.MaxHeaderBytes, defaultMaxHeaderBytes),
	}
	if out.MaxHeaderBytes < 0 {
		return Limits{}, fmt.Errorf("%w: negative MaxHeaderBytes", ErrInvalidOptions)
	}
	if out.IdleTimeout == 0 && l.IdleTimeout < 0 {
		// net/http falls back to ReadTimeout for a zero IdleTimeout;
		// "off" must mean off.
		out.IdleTimeout = 1<<63 - 1
	}
	return out, nil
}

// httpServer is the http.Server Serve runs, with the server's limits.
func (s *Server) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           s.deadlines(h),
		ReadHeaderTimeout: s.http.limits.ReadHeaderTimeout,
		ReadTimeout:       s.http.limits.ReadTimeout,
		WriteTimeout:      s.http.limits.WriteTimeout,
		IdleTimeout:       s.http.limits.IdleTimeout,
		MaxHeaderBytes:    s.http.limits.MaxHeaderBytes,
	}
}

// deadlines adapts WriteTimeout to MCP's long-lived responses. Its
// deadline is set once, when a request's headers are read, and would cut
// every response that lasts longer: a call's, which waits for the call,
// and a standalone SSE stream, which lives as long as its session. So each
// write and flush gets a fresh deadline instead, and a client that stops
// reading is still cut off. ReadTimeout needs no such care: net/http
// lifts the read deadline once the body has been read.
func (s *Server) deadlines(h http.Handler) http.Handler {
	if s.http.limits.WriteTimeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&writeDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: s.http.limits.WriteTimeout}, r)
	})
}

// writeDeadline gives each write and flush of a response its own deadline.
type writeDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *writeDeadline) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *writeDeadline) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }
