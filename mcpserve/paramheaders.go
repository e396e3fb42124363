package mcpserve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/internal/quote"
)

// Custom headers (SEP-2243, protocol 2026-07-28). A tool's input schema
// may mark a primitive argument with "x-mcp-header": NAME, and a client
// then sends the argument's value in an Mcp-Param-NAME header as well as
// in the body, so that a proxy can route on it without reading the body.
// The server must refuse a request whose header and body disagree: a
// header missing for an argument present, one present for an argument
// absent or null, a value that differs, or one that is not valid Base64
// inside its =?base64?...?= wrapper. The SDK checks this for the tools in
// its own table alone, and a catalog's tools are not there, so the front
// checks it for them, as the SDK would: before any other handling, with
// the SDK's answer to a mismatch (HTTP 400, JSON-RPC CodeHeaderMismatch).
//
// The check costs a request nothing while no tool of the catalog marks an
// argument: the marked tools are found once per listing (paramTools).
// Once one does, each 2026-07-28 POST's body is decoded for its method,
// name and arguments.

// paramHeader is an argument that travels in a header too: its path in
// the arguments, and the header's name after Mcp-Param-.
type paramHeader struct {
	path   []string
	header string
}

// paramTools are the tools of one listing that mark arguments, by name.
type paramTools struct {
	data  unsafe.Pointer // the listing's backing array, which names it
	n     int
	tools map[string][]paramHeader
}

// paramHeaderTools returns the marked tools of the catalog's current
// tool listing, finding them again when the listing changed.
func (s *Server) paramHeaderTools() map[string][]paramHeader {
	list := s.cat.Tools().List()
	data, n := unsafe.Pointer(unsafe.SliceData(list)), len(list)
	if pt := s.params.Load(); pt != nil && pt.data == data && pt.n == n {
		return pt.tools
	}
	pt := &paramTools{data: data, n: n}
	for _, t := range list {
		if !bytes.Contains(t.InputSchema, []byte("x-mcp-header")) {
			continue
		}
		if ph := paramHeadersOf(t.InputSchema); len(ph) > 0 {
			if pt.tools == nil {
				pt.tools = map[string][]paramHeader{}
			}
			pt.tools[t.Name] = ph
		}
	}
	s.params.Store(pt)
	return pt.tools
}

// schemaProperty is what a schema's property says of headers.
type schemaProperty struct {
	XMCPHeader json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// paramHeadersOf returns the marked arguments of an input schema, at any
// depth, as the SDK finds them.
func paramHeadersOf(schema json.RawMessage) []paramHeader {
	var root schemaProperty
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil
	}
	return collectParamHeaders(root.Properties, nil, nil)
}

func collectParamHeaders(props map[string]schemaProperty, prefix []string, out []paramHeader) []paramHeader {
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(p.XMCPHeader, &header) == nil && header != "" {
			out = append(out, paramHeader{path: path, header: header})
		}
		if len(p.Properties) > 0 {
			out = collectParamHeaders(p.Properties, path, out)
		}
	}
	return out
}

// checkParamHeaders answers a request of protocol 2026-07-28 whose body,
// data, calls a tool that marks arguments, and whose headers disagree
// with its arguments, and reports whether it did not.
func (s *Server) checkParamHeaders(w http.ResponseWriter, r *http.Request, data []byte) bool {
	if r.Header.Get(protocolHeader) < ProtocolStateless {
		return true
	}
	tools := s.paramHeaderTools()
	if len(tools) == 0 {
		return true
	}
	// The method is read from the decoded message, never looked for in
	// the bytes: "tools\/call" names tools/call too. strictBody has
	// refused a body whose names two decoders could read two ways.
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if _, err := segjson.Parse(data, &msg, segjson.DontMatchCaseInsensitiveStructFields); err != nil || msg.Method != methodCallTool {
		return true // not a call the check applies to; the rest judges it
	}
	ph, ok := tools[msg.Params.Name]
	if !ok {
		return true
	}
	err := paramHeadersMatch(r.Header, msg.Params.Arguments, ph)
	if err == nil {
		return true
	}
	id := msg.ID
	if len(id) == 0 || badID(id, true) != "" {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": mcp.CodeHeaderMismatch, "message": err.Error()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	return false
}

// paramHeadersMatch reports how h disagrees with args on the marked
// arguments ph, as the SDK judges it; nil when it does not.
func paramHeadersMatch(h http.Header, args map[string]json.RawMessage, ph []paramHeader) error {
	for _, p := range ph {
		name := "Mcp-Param-" + p.header
		got := h.Get(name)
		arg, ok := argumentAt(args, p.path)
		where := quote.Name(strings.Join(p.path, "."))
		if !ok || string(arg) == "null" {
			if got != "" {
				return fmt.Errorf("header mismatch: unexpected %s header for absent or null parameter %s", name, where)
			}
			continue
		}
		if got == "" {
			return fmt.Errorf("header mismatch: missing %s header for parameter %s", name, where)
		}
		decoded, ok := decodeParamHeader(got)
		if !ok {
			return fmt.Errorf("header mismatch: %s header contains invalid Base64 encoding", name)
		}
		want, ok := primitive(arg)
		if !ok {
			return fmt.Errorf("header mismatch: %s header present but body parameter %s is not a primitive type", name, where)
		}
		if !primitiveEqual(decoded, want) {
			return fmt.Errorf("header mismatch: %s header value %s does not match body value", name, quote.Name(got))
		}
	}
	return nil
}

// argumentAt returns the argument at path in args.
func argumentAt(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[part]
	}
	return cur, ok
}

// The integers a header may carry: those a double holds exactly.
const maxSafeInteger = 1<<53 - 1

// primitive decodes a JSON argument as SEP-2243 reads one: a string, a
// boolean, or an integer within ±(2^53-1).
func primitive(raw json.RawMessage) (any, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	switch x := v.(type) {
	case string, bool:
		return x, true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) || math.Abs(x) > maxSafeInteger {
			return nil, false
		}
		return int64(x), true
	}
	return nil, false
}

// primitiveEqual reports whether a decoded header value names v.
func primitiveEqual(header string, v any) bool {
	switch x := v.(type) {
	case int64:
		f, err := strconv.ParseFloat(header, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
			return false
		}
		return int64(f) == x
	case bool:
		return header == strconv.FormatBool(x)
	case string:
		return header == x
	}
	return false
}

// decodeParamHeader decodes a header value wrapped as =?base64?...?=, and
// takes any other as it is; false for a wrapped value that is not valid
// padded Base64.
func decodeParamHeader(v string) (string, bool) {
	enc, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	if enc, ok = strings.CutSuffix(enc, "?="); !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}
