//lint:file-ignore SA1019 MCP logging is deprecated as of protocol 2026-07-28 but still served during its deprecation window, and clients of earlier protocols use it.

package mcpserve

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// fastWriter writes the fast path's response: one JSON-RPC response as
// application/json, or, once the call sends a notification before it,
// server-sent events ending with the response. Its methods are safe for
// concurrent use: a body may report progress from goroutines of its own.
type fastWriter struct {
	w       http.ResponseWriter
	id      json.RawMessage
	current bool
	impl    *mcp.Implementation
	session string // the session's ID, echoed in the response as the SDK does
	status  int    // the HTTP status of an error response, if not errorStatus's

	mu   sync.Mutex
	sse  bool // the headers went out as an event stream
	done bool // the response went out; later notifications are dropped
	buf  *bytes.Buffer
}

// bufs holds the buffers requests are read into and responses encoded
// into. A buffer that grew
// past maxPooledBuf (a large listing, a large result) is left to the
// collector, so that one large response does not pin its memory.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuf = 1 << 20

func newFastWriter(w http.ResponseWriter, fr fastRequest, impl *mcp.Implementation) *fastWriter {
	b := bufs.Get().(*bytes.Buffer)
	b.Reset()
	f := &fastWriter{w: w, id: fr.id, current: fr.current, impl: impl, buf: b}
	if fr.session != nil {
		f.session = fr.session.id
	}
	return f
}

// release returns the writer's buffer once the response has gone out.
func (f *fastWriter) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	putBuf(f.buf)
	f.buf = nil
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuf {
		bufs.Put(b)
	}
}

// fastClientKey is the context key of a fast-path call's client (see
// clientFor).
type fastClientKey struct{}

// fastWriterKey is the context key of a forwarded fast-path call's writer
// (see beginHop).
type fastWriterKey struct{}

// client is what a tool body reports to over the fast path, as callClient
// is over the SDK's session: log messages at or above the level of the
// session the SDK would have made (info for a 2025 request; for
// 2026-07-28, the level its _meta names, or none), progress when
// the request carries a token, and roots/list when the session's client
// declared roots: the fast path writes only the call's own response, so
// the SDK sends that request on the session's standalone stream. A
// stateless request offers no sampling, elicitation or roots mid-call; a
// 2026-07-28 one answers in rounds (rounds.go).
func (f *fastWriter) client(fr fastRequest) *catalog.Client {
	cl := &catalog.Client{}
	var threshold func() mcp.LoggingLevel
	switch {
	case fr.session != nil:
		// The level the session set, read as each message is sent, as
		// the SDK reads it.
		threshold = func() mcp.LoggingLevel {
			if l := fr.session.fast.level.Load(); l != nil {
				return *l
			}
			return ""
		}
	case !fr.current:
		threshold = func() mcp.LoggingLevel { return "info" }
	case fr.logLevel != "":
		threshold = func() mcp.LoggingLevel { return mcp.LoggingLevel(fr.logLevel) }
	}
	if threshold != nil {
		cl.Log = func(_ context.Context, m catalog.LogMessage) error {
			level, th := mcpLevel(m.Level), threshold()
			if th == "" || levelRank(level) < levelRank(th) {
				return nil
			}
			return f.notify(notificationMessage, &mcp.LoggingMessageParams{Level: level, Logger: m.Logger, Data: m.Data})
		}
	}
	if fr.session != nil {
		cl.ListRoots = fr.session.fast.listRoots
	}
	if tok := fr.progress; tok != nil {
		cl.Progress = func(_ context.Context, p catalog.Progress) error {
			return f.notify("notifications/progress", &mcp.ProgressNotificationParams{
				ProgressToken: tok, Progress: p.Progress, Total: p.Total, Message: p.Message,
			})
		}
	}
	return cl
}

// levelRank orders MCP's log levels: debug, which mcpLevels leaves out,
// and a level MCP does not name rank lowest, as the SDK ranks them.
func levelRank(l mcp.LoggingLevel) int {
	for i, m := range mcpLevels {
		if m.name == l {
			return len(mcpLevels) - i
		}
	}
	return 0
}

// notify writes a notification as an event, the first one turning the
// response into an event stream.
func (f *fastWriter) notify(method string, params any) error {
	data, err := json.Marshal(params)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil // the call has been answered: nothing carries it now
	}
	f.stream()
	b := f.buf
	b.Reset()
	b.WriteString(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":`)
	b.WriteString(strconv.Quote(method))
	b.WriteString(`,"params":`)
	b.Write(data)
	b.WriteString("}\n\n")
	if _, err := f.w.Write(b.Bytes()); err != nil {
		return err
	}
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return nil
}

// stream turns the response into an event stream, sending its status and
// headers, unless it is one already. The caller holds mu.
func (f *fastWriter) stream() {
	if f.sse {
		return
	}
	f.sse = true
	h := f.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	if f.session != "" {
		h.Set(sessionIDHeader, f.session)
	}
	f.w.WriteHeader(http.StatusOK)
}

// begin begins the response of a forwarded call now, as an event stream,
// so that the replica that forwarded it sees it dispatched (see
// FleetHandler); the response then ends the stream.
func (f *fastWriter) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done || f.sse {
		return
	}
	f.stream()
	f.flush()
}

// respond writes the response to the request, from what the answer
// returned.
func (f *fastWriter) respond(res mcp.Result, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	b := f.buf
	b.Reset()
	if f.sse {
		b.WriteString("event: message\ndata: ")
	}
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(f.id)
	status := http.StatusOK
	if err != nil {
		we := wireError(err)
		status = cmp.Or(f.status, f.errorStatus(we.Code))
		b.WriteString(`,"error":`)
		if werr := encodeTo(b, we); werr != nil {
			b.Truncate(0)
			http.Error(f.w, "Internal Server Error", http.StatusInternalServerError)
			return
		}
	} else {
		if f.current {
			annotate(res, f.impl)
		}
		b.WriteString(`,"result":`)
		if werr := encodeTo(b, res); werr != nil {
			http.Error(f.w, "Internal Server Error", http.StatusInternalServerError)
			return
		}
	}
	b.WriteByte('}')
	if f.sse {
		b.WriteString("\n\n")
	}
	if err != nil {
		// The bound the SDK path's output passes through (echoBound),
		// over the hygiene's: the two must bound alike.
		if out, ok := boundWrite(b.Bytes()); ok {
			b.Reset()
			b.Write(out)
		}
	}
	if !f.sse {
		h := f.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		if f.session != "" {
			h.Set(sessionIDHeader, f.session)
		}
		f.w.WriteHeader(status)
	}
	_, _ = f.w.Write(b.Bytes())
	f.flush()
}

// respondEncoded writes the response whose result is the JSON result,
// already encoded (and annotated, for 2026-07-28).
func (f *fastWriter) respondEncoded(result []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	b := f.buf
	b.Reset()
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(f.id)
	b.WriteString(`,"result":`)
	b.Write(result)
	b.WriteByte('}')
	h := f.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	if f.session != "" {
		h.Set(sessionIDHeader, f.session)
	}
	f.w.WriteHeader(http.StatusOK)
	_, _ = f.w.Write(b.Bytes())
	f.flush()
}

// flush sends the response now, not when the handler returns: a graceful
// shutdown counts a request done when its handler returns, and closes the
// connections soon after, which must not cut a response still buffered.
// (The same single write: the response has its length.)
func (f *fastWriter) flush() {
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// errorStatus is the HTTP status of an error response: SEP-2575 gives one
// to some codes of a 2026-07-28 request's errors, which the SDK then
// sends as a plain JSON body; everything else is 200.
func (f *fastWriter) errorStatus(code int64) int {
	if !f.current || f.sse {
		return http.StatusOK
	}
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, codeUnsupportedProtocolVersion, codeMissingClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// JSON-RPC codes of the 2026-07-28 revision that carry an HTTP status.
const (
	codeUnsupportedProtocolVersion = -32022
	codeMissingClientCapabilities  = -32021
)

// wireError is the JSON-RPC error the SDK sends for err: err itself when it
// is one, otherwise its message with the code of the wire error it wraps,
// if any.
func wireError(err error) *jsonrpc.Error {
	if we, ok := err.(*jsonrpc.Error); ok {
		return we
	}
	out := &jsonrpc.Error{Message: err.Error()}
	var wrapped *jsonrpc.Error
	if errors.As(err, &wrapped) {
		out.Code = wrapped.Code
	}
	return out
}

// annotate adds to a 2026-07-28 result what the SDK adds: the server's
// name in its _meta, and its result type.
func annotate(res mcp.Result, impl *mcp.Implementation) {
	markComplete(res)
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.ResultType = "complete"
	case *mcp.ListResourcesResult:
		r.ResultType = "complete"
	case *mcp.ListResourceTemplatesResult:
		r.ResultType = "complete"
	case *mcp.ListPromptsResult:
		r.ResultType = "complete"
	}
	m := res.GetMeta()
	if _, ok := m[metaServerInfo]; ok {
		return
	}
	if m == nil {
		m = map[string]any{}
	}
	m[metaServerInfo] = impl
	res.SetMeta(m)
}

// encodeTo appends v's JSON to b as the SDK encodes it: without escaping
// HTML, and without the encoder's newline.
func encodeTo(b *bytes.Buffer, v any) error {
	n := b.Len()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.Truncate(n)
		return err
	}
	b.Truncate(b.Len() - 1)
	return nil
}
