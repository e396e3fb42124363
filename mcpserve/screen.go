package mcpserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/livereg/livereg/internal/quote"
)

// batchesEnd is the first MCP revision without JSON-RPC batches.
const batchesEnd = "2025-06-18"

// maxSafeID is the largest integer id that survives a round trip through
// a JSON number read as a float64 (2^53 - 1): a client in JavaScript
// could not match a reply to a larger one.
const maxSafeID = 1<<53 - 1

// screen refuses a POST's body (data), before the SDK parses it, what
// MCP does not allow and the SDK would serve: a JSON-RPC batch on any
// session that did not negotiate a revision older than 2025-06-18, and a
// message whose id does not survive a round trip (a number beyond ±2^53
// or not an integer, null, or anything but a number or a string) or whose
// method or string id is beyond its bound. It answers a refusal itself,
// HTTP 400 with JSON-RPC error -32600 (-32601 for a method name), and
// returns false. Otherwise the body is put back for the SDK, which reads
// it from memory. data has passed strictBody (decode.go): it is one JSON
// value, so that what screen judges is what the SDK's decoder, which
// reads the first value alone, reads. Cost: one pass of encoding/json
// over the body, which the SDK makes again.
func (s *Server) screen(w http.ResponseWriter, r *http.Request, data []byte) bool {
	r.Body = io.NopCloser(bytes.NewReader(data))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !s.batchAllowed(r) {
			refuseMessage(w, nil, jsonrpc.CodeInvalidRequest,
				"Invalid Request: JSON-RPC batches are not supported since MCP "+batchesEnd+"; send one message per request")
			return false
		}
		var msgs []json.RawMessage
		if json.Unmarshal(trimmed, &msgs) != nil {
			return true // not reached: strictBody refused malformed JSON
		}
		for _, m := range msgs {
			if !screenMessage(w, m) {
				return false
			}
		}
		return true
	}
	return screenMessage(w, trimmed)
}

// readBody reads a POST's body into a buffer of bodies, under the SDK's
// own bound (Options.MaxRequestBodyBytes); past it the answer is 413, as
// the SDK's. On false it has answered. The buffer goes back with
// putBody once nothing refers to the body any more; a body handed to the
// SDK keeps its buffer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, bool) {
	body := r.Body
	if s.http.maxBody > 0 {
		body = http.MaxBytesReader(w, r.Body, s.http.maxBody)
	}
	b := bufs.Get().(*bytes.Buffer)
	b.Reset()
	_, err := b.ReadFrom(body)
	_ = r.Body.Close()
	if err != nil {
		putBuf(b)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return nil, false
	}
	return b, true
}

// envelope is what screen reads of a message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
}

// screenMessage checks one message's id and method; a message that is not
// a JSON object is left to the SDK, which refuses it.
func screenMessage(w http.ResponseWriter, msg []byte) bool {
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return true
	}
	var method string
	if len(env.Method) > 0 && json.Unmarshal(env.Method, &method) != nil {
		return true // not a string: the SDK refuses it
	}
	if len(env.ID) > 0 || method != "" {
		// A request (with an id), or a response (an id, no method); a
		// notification has no id at all.
		if why := badID(env.ID, method != ""); why != "" {
			refuseMessage(w, nil, jsonrpc.CodeInvalidRequest, "Invalid Request: "+why)
			return false
		}
	}
	if len(method) > maxMethodBytes {
		refuseMessage(w, env.ID, jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("method not found: %s (at most %d bytes)", quote.Name(method), maxMethodBytes))
		return false
	}
	return true
}

// badID says why id is refused, or "" when it is a string of at most
// maxIDBytes or an integer within ±(2^53 - 1), written as a reply echoes
// it (not -0, which the SDK's reply would turn into 0). A request must
// carry one; a notification none (absent is not checked here).
func badID(id json.RawMessage, request bool) string {
	if len(id) == 0 {
		return "" // a notification
	}
	switch c := id[0]; {
	case c == '"':
		var str string
		if json.Unmarshal(id, &str) != nil {
			return "the id is not a valid string"
		}
		if len(str) > maxIDBytes {
			return fmt.Sprintf("the id is a string of %d bytes, at most %d", len(str), maxIDBytes)
		}
		return ""
	case c == '-' || (c >= '0' && c <= '9'):
		text := string(id)
		if text == "-0" {
			return "the id -0 is not an integer a reply carries as sent; send 0"
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID {
			if strings.ContainsAny(text, ".eE") {
				return fmt.Sprintf("the id %s is not an integer", quote.Name(text))
			}
			return fmt.Sprintf("the id %s is beyond ±(2^53 - 1), which a reply could not carry intact", quote.Name(text))
		}
		return ""
	case string(id) == "null":
		if !request {
			return "" // an error response to a request the peer could not read
		}
		return "the id of a request must not be null"
	}
	return "the id must be a string or an integer"
}

// refuseMessage answers a POST with HTTP 400 and a JSON-RPC error; id is
// the refused message's, when it was valid, or null.
func refuseMessage(w http.ResponseWriter, id json.RawMessage, code int64, msg string) {
	if len(id) == 0 || badID(id, true) != "" {
		id = json.RawMessage("null")
	}
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// batchAllowed reports whether r's session negotiated an MCP revision
// older than 2025-06-18, the last to carry batches. A request without a
// session (an initialize, a stateless server's, or one forwarded by a
// fleet replica, which the fleet's stateless handler serves alone,
// whatever session ID it names) has none that did.
func (s *Server) batchAllowed(r *http.Request) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v >= batchesEnd {
		return false
	}
	id := r.Header.Get(sessionIDHeader)
	if id == "" || !s.http.stateful || len(r.Header[forwardedMark]) > 0 {
		return false
	}
	// Batches are rare, and a session's revision is kept by the SDK
	// alone: a walk over the sessions, only for a batch, is cheaper than
	// keeping a copy in step.
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id {
			p := ss.InitializeParams()
			return p != nil && p.ProtocolVersion != "" && p.ProtocolVersion < batchesEnd
		}
	}
	return false
}

// echoBound bounds the JSON-RPC errors the SDK writes without passing
// them through a middleware, which may quote a client's string in full:
// a request it refuses before any handler runs (an unknown method, an
// Mcp-Name header that does not match the body), answered with an HTTP
// status of 400 or more, and params it cannot decode for a handler
// ("invalid params: unmarshaling" and the whole params, quoted), answered
// in a JSON body or an SSE event like any other reply.
//
// An answer with a status of 400 or more is held (bounded, it is small)
// and rewritten when the handler returns. Otherwise each write is judged
// alone: the SDK writes each SSE event, and a JSON reply, in one write
// (event.go's writeEvent), and a write whose message is an error response
// (its first member after the id is "error") is rewritten as quote.Message
// and boundData bound a handler's errors; a result or a notification
// costs a look at its first bytes and passes untouched.
type echoBound struct {
	http.ResponseWriter
	status int // the held status; 0 while passing through
	held   bytes.Buffer
}

func (e *echoBound) WriteHeader(code int) {
	if code >= http.StatusBadRequest && e.status == 0 {
		e.status = code
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *echoBound) Write(p []byte) (int, error) {
	if e.status != 0 {
		return e.held.Write(p)
	}
	if out, ok := boundWrite(p); ok {
		if _, err := e.ResponseWriter.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return e.ResponseWriter.Write(p)
}

// Flush passes through, except while an answer is held.
func (e *echoBound) Flush() {
	if e.status == 0 {
		_ = http.NewResponseController(e.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (e *echoBound) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// finish writes a held answer, bounded.
func (e *echoBound) finish() {
	if e.status == 0 {
		return
	}
	h := e.ResponseWriter.Header()
	body := e.held.Bytes()
	if strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		body = boundResponse(body)
	} else {
		body = []byte(quote.Message(strings.TrimSuffix(string(body), "\n")) + "\n")
	}
	h.Del("Content-Length")
	e.ResponseWriter.WriteHeader(e.status)
	_, _ = e.ResponseWriter.Write(body)
}

// errorLead is how far into a message its "error" member is looked for:
// past "jsonrpc" and an id of at most maxIDBytes (screen refuses longer).
const errorLead = 64 + 6*maxIDBytes

// boundWrite returns p rewritten when it is one JSON-RPC error response,
// bare or as one SSE event, whose error needs bounding; false otherwise.
func boundWrite(p []byte) ([]byte, bool) {
	pre, msg, post := p[:0], p, p[len(p):]
	if !bytes.HasPrefix(p, []byte("{")) {
		// An SSE event: "event: message\n", maybe "id: ...\n", then
		// "data: <message>\n\n".
		i := bytes.Index(p, []byte("data: "))
		if i < 0 || i > 256 || !bytes.HasSuffix(p, []byte("\n\n")) {
			return nil, false
		}
		pre, msg, post = p[:i+len("data: ")], p[i+len("data: "):len(p)-2], p[len(p)-2:]
	}
	lead := msg[:min(len(msg), errorLead)]
	e := bytes.Index(lead, []byte(`,"error":{`))
	if e < 0 || bytes.Contains(lead[:e], []byte(`"result":`)) || bytes.Contains(lead[:e], []byte(`"method":`)) {
		return nil, false
	}
	out := boundResponse(msg)
	if bytes.Equal(out, msg) {
		return nil, false
	}
	return append(append(append([]byte{}, pre...), out...), post...), true
}

// boundResponse bounds the error of a JSON-RPC response; a body that is
// not one is bounded as text.
func boundResponse(body []byte) []byte {
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
		Result  json.RawMessage `json:"result,omitempty"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Error == nil {
		if len(body) > quote.MaxMessage {
			return []byte(quote.Message(string(body)))
		}
		return body
	}
	resp.Error = &jsonrpc.Error{Code: resp.Error.Code, Message: quote.Message(resp.Error.Message), Data: boundData(resp.Error.Data)}
	out, err := json.Marshal(resp)
	if err != nil {
		return body
	}
	return out
}
