package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path serves the catalog's hot methods straight from the HTTP
// request: tools/call, tools/list, resources/read, resources/list,
// resources/templates/list, prompts/get and prompts/list. It decodes what
// dispatch needs, runs the same answer (answer, in dispatch.go) and the
// same hygiene as the SDK's middleware would, and writes the one JSON-RPC
// response itself. What it skips is the SDK's transport: a session made
// for each stateless request, a connection whose reader hands the request
// to another goroutine and the answer back, and a server-sent event
// stream for a response that is one message.
//
// It takes only requests it can judge exactly as the SDK would, and
// leaves every other to the SDK, unread by anything but screen (every
// body, on either path, has passed strictBody first: decode.go):
//
//   - a POST on a stateless server that names no session, with the
//     Content-Type and Accept the SDK asks for, from a Host the SDK's
//     DNS-rebinding check passes;
//   - protocol 2025-06-18 or 2025-11-25 in the MCP-Protocol-Version
//     header, or 2026-07-28 with its _meta triple (version and client
//     capabilities; client information optional) and its Mcp-Method and
//     Mcp-Name headers matching the body;
//   - one JSON-RPC request, "2.0", an id that screen accepts, a hot method
//     and params that decode into the SDK's type for it, nested less
//     deeply than the SDK's bound;
//   - a progress token, if any, that is an integer or a string.
//
// Everything after that is the SDK path's own code. A body's log messages
// (at info and above for a 2025 request, whose stateless session the SDK
// makes at that level; none for 2026-07-28 without a level) and progress
// notifications are written before the result, as server-sent events;
// a response with nothing before it is application/json. A 2026-07-28
// result names the server in its _meta, and a 2026-07-28 error whose code
// SEP-2575 gives an HTTP status is sent with it, as the SDK does.
//
// TestFastPathMatchesSDK sends the same requests down both paths and
// compares the answers field by field; FuzzFastPath does so for arbitrary
// bodies.

// testHookFast, if set, is called with the method of every request the
// fast path serves (tests).
var testHookFast func(method string)

// fastMethod reports whether the fast path serves method.
func fastMethod(method string) bool {
	switch method {
	case methodCallTool, methodListTools, methodReadResource, methodListResources,
		methodListTemplates, methodListPrompts, methodGetPrompt:
		return true
	}
	return false
}

// listMethod reports whether method is a listing, whose params are
// optional.
func listMethod(method string) bool {
	switch method {
	case methodListTools, methodListResources, methodListTemplates, methodListPrompts:
		return true
	}
	return false
}

var emptyParams = json.RawMessage("{}")

// Protocol revisions and headers the fast path reads.
const (
	protocolHeader = "Mcp-Protocol-Version"
	methodHeader   = "Mcp-Method"
	nameHeader     = "Mcp-Name"
	lastEventID    = "Last-Event-ID"
)

// Keys of a request's _meta.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaProgressToken      = "progressToken"
)

// fastEnvelope is a JSON-RPC message as the fast path decodes it: as the
// SDK does, with field names matched by case.
type fastEnvelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// fastRequest is a request the fast path took.
type fastRequest struct {
	id       json.RawMessage // as sent, checked by badID
	method   string
	req      mcp.Request
	current  bool          // protocol 2026-07-28
	progress any           // the request's progress token, or nil
	session  *sessionCalls // the request's session; nil when stateless
	logLevel string        // the log level a 2026-07-28 request's _meta names; "" for none
	// forwarded: another replica forwarded it (FleetHandler); its
	// response begins as soon as its call is dispatched.
	forwarded bool
}

// fastTake decides whether the fast path serves r, whose body is data,
// and decodes it if so; forwarded is set for a request FleetHandler took,
// whose stateless SDK handler the fast path then stands in for, for
// protocol 2026-07-28 alone, which is what a forwarder sends. It changes
// nothing and writes nothing.
func (s *Server) fastTake(r *http.Request, data []byte, sc *sessionCalls, forwarded bool) (fastRequest, bool) {
	if s.http.noFast || !forwarded && s.http.jsonResponse || len(r.Header.Values(lastEventID)) > 0 {
		return fastRequest{}, false
	}
	version := r.Header.Get(protocolHeader)
	current := version == ProtocolStateless
	if forwarded {
		if !current || r.Header.Get(sessionIDHeader) != "" {
			return fastRequest{}, false
		}
	} else if s.http.stateful && !(current && r.Header.Get(sessionIDHeader) == "") {
		// A session's request, on a session the fast path may serve,
		// naming the revision the session negotiated.
		if sc == nil || !sc.takes(version) {
			return fastRequest{}, false
		}
	} else if r.Header.Get(sessionIDHeader) != "" || !current && !fastSessionVersion(version) {
		return fastRequest{}, false
	}
	if !s.hostAllowed(r) || !jsonContent(r.Header.Get("Content-Type")) || !acceptsBoth(r.Header.Values("Accept")) {
		return fastRequest{}, false
	}
	// data passed strictBody: one value, nested no deeper than the SDK
	// accepts, with no duplicate or case-variant names.
	var env fastEnvelope
	rest, err := segjson.Parse(data, &env, segjson.DontMatchCaseInsensitiveStructFields|segjson.DontCopyRawMessage)
	if err != nil || len(bytes.TrimLeft(rest, " \t\r\n")) > 0 || env.JSONRPC != "2.0" || env.Method == nil ||
		!fastMethod(*env.Method) || env.Result != nil || env.Error != nil || len(env.ID) == 0 ||
		badID(env.ID, true) != "" {
		return fastRequest{}, false
	}
	if env.Params == nil && !current && listMethod(*env.Method) {
		// A listing's params are optional before 2026-07-28, and the
		// SDK's client sends none for the first page.
		env.Params = emptyParams
	}
	if !isObject(env.Params) {
		return fastRequest{}, false
	}
	fr := fastRequest{id: env.ID, method: *env.Method, current: current, session: sc, forwarded: forwarded}
	var meta mcp.Meta
	var name string
	var named bool
	if fr.req, meta, name, named, err = decodeParams(fr.method, env.Params); err != nil {
		return fastRequest{}, false
	}
	var ss *mcp.ServerSession
	if sc != nil {
		ss = sc.ss
	}
	setSession(fr.req, &mcp.RequestExtra{Header: r.Header}, ss)
	if current {
		if r.Header.Get(methodHeader) != fr.method || (named && (name == "" || r.Header.Get(nameHeader) != name)) {
			return fastRequest{}, false
		}
		if !currentMeta(meta) {
			return fastRequest{}, false
		}
		// The level the SDK reads: a string, whatever it names (one it
		// does not know counts as debug); anything else is none.
		fr.logLevel, _ = meta[metaLogLevel].(string)
	} else if _, ok := meta[metaProtocolVersion]; ok {
		return fastRequest{}, false
	}
	if tok, ok := meta[metaProgressToken]; ok {
		switch tok.(type) {
		case string, float64:
			fr.progress = tok
		default:
			return fastRequest{}, false
		}
	}
	return fr, true
}

// currentMeta reports whether meta is a 2026-07-28 request's _meta the
// SDK accepts.
func currentMeta(meta mcp.Meta) bool {
	if v, _ := meta[metaProtocolVersion].(string); v != ProtocolStateless {
		return false
	}
	caps, ok := meta[metaClientCapabilities].(map[string]any)
	if !ok || !decodes(caps, new(mcp.ClientCapabilities)) {
		return false
	}
	if info, ok := meta[metaClientInfo]; ok {
		m, ok := info.(map[string]any)
		if !ok || !decodes(m, new(mcp.Implementation)) {
			return false
		}
	}
	return true
}

// decodes reports whether v, decoded JSON, decodes into into.
func decodes(v any, into any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	_, err = segjson.Parse(b, into, segjson.DontMatchCaseInsensitiveStructFields)
	return err == nil
}

// decodeParams decodes params into the SDK's request for method, and
// returns its _meta and, for a named method, the name an Mcp-Name header
// must match.
func decodeParams(method string, params json.RawMessage) (req mcp.Request, meta mcp.Meta, name string, named bool, err error) {
	switch method {
	case methodCallTool:
		p := &mcp.CallToolParamsRaw{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta, name, named = &mcp.CallToolRequest{Params: p}, p.Meta, p.Name, true
	case methodGetPrompt:
		p := &mcp.GetPromptParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta, name, named = &mcp.GetPromptRequest{Params: p}, p.Meta, p.Name, true
	case methodReadResource:
		p := &mcp.ReadResourceParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta, name, named = &mcp.ReadResourceRequest{Params: p}, p.Meta, p.URI, true
	case methodListTools:
		p := &mcp.ListToolsParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta = &mcp.ListToolsRequest{Params: p}, p.Meta
	case methodListResources:
		p := &mcp.ListResourcesParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta = &mcp.ListResourcesRequest{Params: p}, p.Meta
	case methodListTemplates:
		p := &mcp.ListResourceTemplatesParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta = &mcp.ListResourceTemplatesRequest{Params: p}, p.Meta
	case methodListPrompts:
		p := &mcp.ListPromptsParams{Meta: metaFor(params)}
		err = parseParams(params, p)
		req, meta = &mcp.ListPromptsRequest{Params: p}, p.Meta
	}
	return req, meta, name, named, err
}

// metaFor is the map a _meta in data is decoded into: one sized for the
// few keys a _meta has, where the decoder would make one of 64 (4.75 KiB)
// for a nil one; nil when data has none. A Meta left empty reads as one
// left nil.
func metaFor(data []byte) mcp.Meta {
	if bytes.Contains(data, []byte(`"_meta"`)) {
		return make(mcp.Meta, 4)
	}
	return nil
}

func parseParams(params json.RawMessage, p any) error {
	_, err := segjson.Parse(params, p, segjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// setSession gives req the request's extra information and its session
// (nil on a stateless server), as the SDK does.
func setSession(req mcp.Request, ex *mcp.RequestExtra, ss *mcp.ServerSession) {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.GetPromptRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.ReadResourceRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.ListToolsRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.ListResourcesRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.ListResourceTemplatesRequest:
		r.Extra, r.Session = ex, ss
	case *mcp.ListPromptsRequest:
		r.Extra, r.Session = ex, ss
	}
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// jsonContent reports whether a Content-Type is application/json, as the
// SDK reads it.
func jsonContent(ct string) bool {
	if ct == "application/json" {
		return true // what every client sends; the parse allocates
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// acceptsBoth reports whether Accept takes both JSON and event streams,
// as the SDK reads it.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for raw := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// hostAllowed is the SDK's DNS-rebinding check: a request that reached a
// loopback address must name a loopback host.
func (s *Server) hostAllowed(r *http.Request) bool {
	if s.http.anyHost {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !loopbackAddr(local.String()) {
		return true
	}
	return loopbackAddr(r.Host)
}

// loopbackAddr is the SDK's reading of a host or host:port as loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fastServe answers fr on w. The call runs on the request's goroutine
// under its context.
func (s *Server) fastServe(w http.ResponseWriter, r *http.Request, fr fastRequest) {
	if testHookFast != nil {
		testHookFast(fr.method)
	}
	out := newFastWriter(w, fr, s.impl)
	defer out.release()
	ctx := r.Context()
	if fr.session != nil {
		var end func()
		var ok bool
		if ctx, end, ok = fr.session.trackFast(ctx, fr.id); !ok {
			out.status = http.StatusBadRequest
			out.respond(nil, duplicateID(fr.id))
			return
		}
		defer end()
	}
	if snap := s.listSnapshot(fr.method); snap != nil {
		s.fastList(ctx, out, fr, snap)
		return
	}
	if fr.method == methodCallTool {
		ctx = context.WithValue(ctx, fastClientKey{}, out.client(fr))
	}
	if fr.forwarded {
		if s.fleet.onForwarded != nil {
			s.fleet.onForwarded(fr.method)
		}
		ctx = context.WithValue(ctx, fastWriterKey{}, out)
	}
	res, err := s.hygienic(ctx, fr.method, fr.req, s.answered)
	out.respond(res, err)
}

// answered is answer as the next handler of the fast path's hygiene:
// answer serves every method the fast path takes.
func (s *Server) answered(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
	res, err, _ := s.answer(ctx, method, req)
	return res, err
}
