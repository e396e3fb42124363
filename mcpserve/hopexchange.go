package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// The hop's exchange is one POST and its response, read here rather than
// by the SDK's client: the SDK would run a session per peer, a reader
// goroutine per connection and a hand-off per message, where a forward
// needs one request out and one answer back. What the request is: a
// JSON-RPC request of protocol 2026-07-28 with the headers that revision
// asks for (Mcp-Method, Mcp-Name), always id 1 (one request per HTTP
// exchange), and a progress token when the caller asked for progress.
// What the answer may be: a JSON body (an error the holder sends with an
// HTTP status, or the whole answer), or an event stream whose events are
// the holder's progress notifications, relayed to the caller in order,
// and then the response; log messages too, when the caller's client takes
// them (every level is asked for, and the caller's own filters them).
// TestForwardMatchesLocal compares what a caller
// gets through the hop with what it gets from the holder directly.

// hopRequest is the request a forward sends.
type hopRequest struct {
	method string          // methodCallTool, methodReadResource, methodGetPrompt or methodComplete
	name   string          // the tool's or prompt's name, the resource's URI; what a completion completes, for the log
	args   json.RawMessage // a tool's arguments as the caller sent them; nil for none
	// fields are the params of a prompts/get or a completion/complete,
	// encoded without their braces (forwardsurface.go).
	fields []byte
	caps   json.RawMessage // the client capabilities a 2026-07-28 caller declared; nil for none
	// A 2026-07-28 caller's retry of a call that asked for input: its
	// answers and the requestState, which the holder judges.
	responses json.RawMessage // nil for none
	state     string
}

// toolCall is the hop request of a tools/call whose caller, if a
// 2025-11-25 session, is cl. With tasks set the holder may start a task
// for a caller that takes them (fleettasks.go).
func toolCall(p *mcp.CallToolParamsRaw, cl *catalog.Client, tasks bool) hopRequest {
	r := hopRequest{method: methodCallTool, name: p.Name, args: p.Arguments}
	r.setRound(p.Meta, cl, p.InputResponses, p.RequestState, tasks)
	return r
}

// resourceRead is toolCall for a resources/read.
func resourceRead(p *mcp.ReadResourceParams, cl *catalog.Client) hopRequest {
	r := hopRequest{method: methodReadResource, name: p.URI}
	r.setRound(p.Meta, cl, p.InputResponses, p.RequestState, false)
	return r
}

// setRound carries what the caller's request says of its rounds of input:
// the client capabilities a 2026-07-28 caller declared, or those a
// 2025-11-25 session's client cl offers (hoprounds.go), and a retry's
// answers and state. The tasks extension is carried only with tasks set.
func (r *hopRequest) setRound(meta mcp.Meta, cl *catalog.Client, responses mcp.InputResponseMap, state string, tasks bool) {
	if r.caps = callerCaps(meta, tasks); r.caps == nil && !namesCurrent(meta) {
		r.caps = sessionCaps(cl)
	}
	if r.caps == nil || state == "" {
		return
	}
	r.state = state
	if len(responses) > 0 {
		r.responses, _ = json.Marshal(responses) // decoded from JSON, so it encodes
	}
}

// hopID is the id of every hop request.
const hopID = "1"

// hopMeta is the _meta every hop request carries, encoded without its
// braces: the revision and the client's name. The client's capabilities
// are each request's (see encode).
func hopMeta(impl *mcp.Implementation) string {
	info, _ := json.Marshal(impl)
	return `"` + metaProtocolVersion + `":"` + ProtocolStateless + `","` + metaClientInfo + `":` + string(info)
}

// callerCaps is the client capabilities a tools/call's _meta declares, for
// the hop to declare in turn, so that the holder judges a body's need of
// one (catalog.CapabilityError) as it would the caller's own request; nil
// for a 2025 request, whose capabilities no hop can carry. The tasks
// extension goes only with tasks set: a replica that cannot serve tasks
// across the fleet runs a forwarded call to its end, as for a client that
// takes no tasks.
func callerCaps(meta mcp.Meta, tasks bool) json.RawMessage {
	if !namesCurrent(meta) {
		return nil
	}
	caps, ok := meta[metaClientCapabilities].(map[string]any)
	if !ok || len(caps) == 0 {
		return nil
	}
	if ext, ok := caps["extensions"].(map[string]any); ok {
		if _, declared := ext[extTasks]; declared && !tasks {
			caps = maps.Clone(caps)
			ext = maps.Clone(ext)
			delete(ext, extTasks)
			caps["extensions"] = ext
		}
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return nil
	}
	return b
}

// encode returns r's body, with a progress token when progress is set,
// and asking for every log message when logs is.
// The body is the request's own, not a pooled buffer: the HTTP client
// may still read it after the response has come.
func (f *forwarder) encode(r hopRequest, progress, logs bool) []byte {
	b := bytes.NewBuffer(make([]byte, 0, 224+len(f.meta)+len(r.name)+len(r.args)+len(r.fields)+len(r.caps)+len(r.responses)+len(r.state)))
	b.WriteString(`{"jsonrpc":"2.0","id":` + hopID + `,"method":"`)
	b.WriteString(r.method)
	if r.method == methodCallTool {
		b.WriteString(`","params":{"name":`)
		_ = encodeTo(b, r.name) // a string always encodes
		if len(r.args) > 0 {
			b.WriteString(`,"arguments":`)
			b.Write(r.args)
		}
	} else if r.method == methodReadResource {
		b.WriteString(`","params":{"uri":`)
		_ = encodeTo(b, r.name)
	} else {
		b.WriteString(`","params":{`)
		b.Write(r.fields)
	}
	if r.state != "" {
		if r.responses != nil {
			b.WriteString(`,"inputResponses":`)
			b.Write(r.responses)
		}
		b.WriteString(`,"requestState":`)
		_ = encodeTo(b, r.state)
	}
	b.WriteString(`,"_meta":{`)
	b.WriteString(f.meta)
	b.WriteString(`,"` + metaClientCapabilities + `":`)
	if r.caps != nil {
		b.Write(r.caps)
	} else {
		b.WriteString(`{}`)
	}
	if progress {
		b.WriteString(`,"` + metaProgressToken + `":1`)
	}
	if logs {
		// Every message: the caller's client applies the caller's level.
		b.WriteString(`,"` + metaLogLevel + `":"debug"`)
	}
	b.WriteString(`}}}`)
	return b.Bytes()
}

// hopMessage is a JSON-RPC message of the holder's answer.
type hopMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// errNoResponse: the holder's answer ended without a response to the
// request.
var errNoResponse = errors.New("mcpserve: the peer's answer ended without a response")

// errNoEnd: the holder's answer did not end within Fleet.ForwardTimeout of
// its response.
var errNoEnd = errors.New("mcpserve: the peer's answer did not end after its response")

// hopStatus is a holder's answer that is an HTTP error, not a JSON-RPC
// response.
type hopStatus struct {
	code int
	body string // its start, for the log
}

// hopRefused reports whether the peer refused the hop request itself
// (hopsign.go's hopRefusal), before anything was dispatched: its
// signature or sender was refused (401; a forwarder whose enrollment the
// holder's view has not seen yet, or has seen go with its lease), or its
// nonces were full (503).
func (e *hopStatus) hopRefused() bool {
	return e.code == http.StatusUnauthorized || e.code == http.StatusServiceUnavailable
}

func (e *hopStatus) Error() string {
	return fmt.Sprintf("mcpserve: the peer answered HTTP %d: %.128q", e.code, e.body)
}

// readers holds the readers of the holder's event streams.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// exchange sends r to the peer pc under ctx, which carries the call's hop,
// relays the holder's progress to cl, and decodes the result into res.
// The holder's JSON-RPC error is returned as a *jsonrpc.Error; anything
// else that fails is the exchange's.
func (f *forwarder) exchange(ctx context.Context, pc *peerClient, r hopRequest, cl *catalog.Client, res any) error {
	progress, logs := cl != nil && cl.Progress != nil, cl != nil && cl.Log != nil
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.endpoint, bytes.NewReader(f.encode(r, progress, logs)))
	if err != nil {
		return err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h[protocolHeader] = []string{ProtocolStateless}
	h[methodHeader] = []string{r.method}
	if r.method != methodComplete {
		// A completion names no route in Mcp-Name.
		h[nameHeader] = []string{r.name}
	}
	resp, err := pc.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	hp, _ := ctx.Value(hopKey{}).(*hop)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// Read whole by fleetTransport already.
		data, err := readAll(resp.Body)
		if err != nil {
			return err
		}
		if msg, ok := response(data); ok {
			return decodeAnswer(msg, res)
		}
		return &hopStatus{code: resp.StatusCode, body: string(data[:min(len(data), 128)])}
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() { br.Reset(nil); readers.Put(br) }()
	var data bytes.Buffer
	for {
		if err := nextEvent(br, &data, f.limit); err != nil {
			if err == io.EOF {
				err = errNoResponse
			}
			return err
		}
		var msg hopMessage
		if _, err := segjson.Parse(data.Bytes(), &msg, 0); err != nil {
			return fmt.Errorf("mcpserve: the peer sent an event that is not JSON-RPC: %w", err)
		}
		switch {
		case msg.Method == notificationProgress && progress:
			var p mcp.ProgressNotificationParams
			if segjson.Unmarshal(msg.Params, &p) == nil {
				_ = cl.Progress(ctx, catalog.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
			}
			continue
		case msg.Method == notificationMessage && logs:
			var p struct {
				//lint:ignore SA1019 MCP logging is deprecated as of 2026-07-28 but still served during its deprecation window.
				Level  mcp.LoggingLevel `json:"level"`
				Logger string           `json:"logger"`
				Data   json.RawMessage  `json:"data"`
			}
			if segjson.Unmarshal(msg.Params, &p) == nil {
				// The data as the body gave it, not decoded and encoded
				// again.
				_ = cl.Log(ctx, catalog.LogMessage{Level: slogLevel(p.Level), Logger: p.Logger, Data: p.Data})
			}
			continue
		}
		if !isHopResponse(msg) {
			continue
		}
		err := decodeAnswer(msg, res)
		if hp != nil {
			hp.answered.Store(true)
			// The rest is the stream's end, which frees the connection
			// for the next forward; a holder that does not end it in
			// time loses the connection.
			t := time.AfterFunc(f.begin, func() { hp.abort(errNoEnd) })
			_, _ = io.Copy(io.Discard, br)
			t.Stop()
		}
		return err
	}
}

// readAll returns what body holds, without a copy when fleetTransport read
// it.
func readAll(body io.Reader) ([]byte, error) {
	if rb, ok := body.(*readBody); ok {
		return rb.data, nil
	}
	return io.ReadAll(body)
}

// readBody is a response body fleetTransport read whole.
type readBody struct {
	*bytes.Reader
	data []byte
}

func (*readBody) Close() error { return nil }

// response decodes data, a JSON body, as the response to a hop request.
func response(data []byte) (hopMessage, bool) {
	var msg hopMessage
	if _, err := segjson.Parse(data, &msg, 0); err != nil || !isHopResponse(msg) {
		return hopMessage{}, false
	}
	return msg, true
}

func isHopResponse(msg hopMessage) bool {
	return msg.Method == "" && string(bytes.TrimSpace(msg.ID)) == hopID && (msg.Result != nil || msg.Error != nil)
}

// decodeAnswer returns the holder's error, or decodes its result into res.
func decodeAnswer(msg hopMessage, res any) error {
	if msg.Error != nil {
		return msg.Error
	}
	var err error
	switch r := res.(type) {
	case *toolAnswer:
		var rt struct {
			ResultType string `json:"resultType"`
		}
		if _, perr := segjson.Parse(msg.Result, &rt, segjson.DontMatchCaseInsensitiveStructFields); perr == nil && rt.ResultType == "task" {
			r.task = bytes.Clone(msg.Result)
			return nil
		}
		err = decodeToolResult(msg.Result, &r.call)
	case *mcp.CallToolResult:
		err = decodeToolResult(msg.Result, r)
	case *mcp.ReadResourceResult:
		err = decodeReadResult(msg.Result, r)
	case *mcp.GetPromptResult:
		err = decodePromptResult(msg.Result, r)
	default:
		err = json.Unmarshal(msg.Result, res)
	}
	if err != nil {
		return fmt.Errorf("mcpserve: the peer's result does not decode: %w", err)
	}
	return nil
}

// nextEvent reads the next event of a server-sent event stream into data:
// its data lines, joined by newlines. Other fields are skipped, and so is
// an event with no data. A line longer than br's buffer is read in pieces
// straight into data, which grows to at most limit. It returns io.EOF at the end of the stream, and
// drops an event the end cuts short.
func nextEvent(br *bufio.Reader, data *bytes.Buffer, limit int64) error {
	data.Reset()
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
		whole := err == nil
		if whole && len(bytes.TrimRight(line, "\r\n")) == 0 {
			if data.Len() > 0 {
				return nil
			}
			continue // an event without data is not dispatched
		}
		v, isData := bytes.CutPrefix(line, []byte("data:"))
		if isData {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			v = bytes.TrimPrefix(v, []byte(" "))
		}
		for {
			if whole {
				v = bytes.TrimRight(v, "\r\n")
			}
			if isData {
				if data.Available() < len(v) {
					// Four times what it holds, bounded by what the hop
					// may read: a long result costs about 1.3 times
					// its size, not the twice of doubling.
					data.Grow(max(len(v), min(3*data.Len(), int(limit)-data.Len())))
				}
				data.Write(v)
			}
			if whole {
				break
			}
			v, err = br.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				return err
			}
			whole = err == nil
		}
	}
}
