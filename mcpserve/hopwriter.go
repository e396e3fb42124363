package mcpserve

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The holder's side of the hop: the response writer of a request another
// replica forwarded here, which begins its answer as soon as the call is
// dispatched, so that the forwarder can tell a frozen replica from a slow
// body (hop.go is the forwarder's side).

// hopWriter is the response writer of a request forwarded here. It lets
// the dispatch begin the response (send its status and headers)
// as soon as a call is dispatched, so that the forwarding replica, which
// waits at most Fleet.ForwardTimeout for the response to begin, also
// waits for a body that runs longer. The SDK writes the rest: events of
// the stream, or, for an error that protocol 2026-07-28 answers with an
// HTTP status and a bare JSON-RPC body, that body, which goes out here as
// one event of the stream begun. Safe for concurrent use.
type hopWriter struct {
	http.ResponseWriter
	mu    sync.Mutex
	begun bool // the status was sent
	early bool // begin sent it
	frame bool // what the SDK writes is a bare JSON-RPC body, to frame
}

type hopWriterKey struct{}

// begin sends the status and headers of an event stream now, unless
// something was written already.
func (w *hopWriter) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.begun || !strings.HasPrefix(w.ResponseWriter.Header().Get("Content-Type"), "text/event-stream") {
		return
	}
	w.begun, w.early = true, true
	w.ResponseWriter.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *hopWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.early {
		w.frame = strings.HasPrefix(w.ResponseWriter.Header().Get("Content-Type"), "application/json")
		return
	}
	if !w.begun {
		w.begun = true
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *hopWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.begun = true
	if !w.frame {
		return w.ResponseWriter.Write(p)
	}
	ev := make([]byte, 0, len(p)+24)
	ev = append(append(append(ev, "event: message\ndata: "...), bytes.TrimSpace(p)...), "\n\n"...)
	if _, err := w.ResponseWriter.Write(ev); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *hopWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *hopWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// beginHop begins the response of the forwarded request that carried a
// call, if it came through FleetHandler: on the fast path, its writer in
// ctx; on the SDK's, the request's hopWriter.
func (s *Server) beginHop(ctx context.Context, ex *mcp.RequestExtra) {
	if f, ok := ctx.Value(fastWriterKey{}).(*fastWriter); ok {
		f.begin()
		return
	}
	if ex == nil {
		return
	}
	hr, _ := s.calls.request(ex.Header)
	if hr == nil {
		return
	}
	if w, ok := hr.ctx.Value(hopWriterKey{}).(*hopWriter); ok {
		w.begin()
	}
}

// forwardedRequest reports whether r carries the marks of a forwarded
// request.
func forwardedRequest(r *http.Request) bool {
	return r.Header.Get(hopHeader) != "" || r.Header.Get(callerHeader) != ""
}
