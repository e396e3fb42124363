package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/shardreg"
)

// Bounds on the strings a client sends, checked before any work. A
// longer one is refused with -32602 (or, for a method, -32601), quoted
// at most quote.Most bytes. URIs are bounded by the catalog
// (catalog.Config.MaxURIBytes).
const (
	// maxNameBytes bounds a tool's or a prompt's name, and the name in a
	// completion's reference: no registry holds a longer one.
	maxNameBytes = shardreg.MaxNameLen
	// maxKeyBytes bounds an argument's name: a tools/call's or a
	// prompts/get's argument keys, a completion's argument name and the
	// keys of its context.
	maxKeyBytes = 1 << 10
	// maxMethodBytes bounds a JSON-RPC method name; MCP's longest is
	// under 40 bytes.
	maxMethodBytes = 128
	// maxIDBytes bounds a JSON-RPC id: a string id comes back in its
	// response.
	maxIDBytes = 256
	// maxErrorData bounds the data of an error livereg or the SDK
	// returns; a longer one has its long strings cut (boundData).
	maxErrorData = 512
)

// methodSetLevel is the one method the hygiene middleware answers itself,
// with an error, for an unknown level.
const methodSetLevel = "logging/setLevel"

// logLevels are MCP's log levels (RFC 5424's): the only ones
// logging/setLevel accepts.
//
//lint:ignore SA1019 deprecated as of protocol 2026-07-28, still served to the clients that use it.
var logLevels = map[mcp.LoggingLevel]bool{
	"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true,
}

// hygiene is the outermost receiving middleware, on every transport: it
// refuses a request whose strings are beyond their bounds (or an unknown
// log level) before anything else looks at it, and bounds every error
// that comes back, livereg's or the SDK's, so that none quotes more than
// quote.Most bytes of a client's string.
func (s *Server) hygiene(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		return s.hygienic(ctx, method, req, next)
	}
}

// hygienic is the hygiene middleware's work around next, for the fast
// path too.
func (s *Server) hygienic(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if err := s.checkStrings(method, req); err != nil {
		return nil, err
	}
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, boundError(err)
	}
	return res, nil
}

// checkStrings checks the strings of req against their bounds; it costs
// a length comparison per string.
func (s *Server) checkStrings(method string, req mcp.Request) error {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if p := r.Params; p != nil {
			if err := within("tool name", p.Name, maxNameBytes); err != nil {
				return err
			}
			return argumentKeysWithin(p.Arguments)
		}
	case *mcp.GetPromptRequest:
		if p := r.Params; p != nil {
			if err := within("prompt name", p.Name, maxNameBytes); err != nil {
				return err
			}
			return keysWithin(p.Arguments)
		}
	case *mcp.ReadResourceRequest:
		if p := r.Params; p != nil {
			return s.uriWithin(p.URI)
		}
	case *mcp.SubscribeRequest:
		if p := r.Params; p != nil {
			return s.uriWithin(p.URI)
		}
	case *mcp.UnsubscribeRequest:
		if p := r.Params; p != nil {
			return s.uriWithin(p.URI)
		}
	case *mcp.CompleteRequest:
		if p := r.Params; p != nil {
			if p.Ref != nil {
				if err := within("reference name", p.Ref.Name, maxNameBytes); err != nil {
					return err
				}
				if err := s.uriWithin(p.Ref.URI); err != nil {
					return err
				}
			}
			if err := within("argument name", p.Argument.Name, maxKeyBytes); err != nil {
				return err
			}
			if p.Context != nil {
				return keysWithin(p.Context.Arguments)
			}
		}
	//lint:ignore SA1019 deprecated as of protocol 2026-07-28, still served to the clients that use it.
	case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
		if p := r.Params; p != nil && !logLevels[p.Level] {
			return invalidParams(fmt.Sprintf("%s: unknown log level %s; want one of debug, info, notice, warning, error, critical, alert, emergency",
				methodSetLevel, quote.Name(string(p.Level))), nil)
		}
	}
	return nil
}

func within(what, v string, most int) error {
	if len(v) <= most {
		return nil
	}
	return invalidParams(fmt.Sprintf("%s %s is too long: %d bytes, at most %d", what, quote.Name(v), len(v), most), nil)
}

// argumentKeysWithin checks the keys of a tools/call's arguments, an
// object as sent; above maxKeyBytes it reads the object once, without
// keeping its values.
// Arguments that are not an object are left to the catalog to refuse.
func argumentKeysWithin(raw json.RawMessage) error {
	if len(raw) <= maxKeyBytes {
		return nil // no key is longer than the whole: most calls stop here
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil
		}
		if k, ok := t.(string); ok {
			if err := within("argument name", k, maxKeyBytes); err != nil {
				return err
			}
		}
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return nil
		}
	}
	return nil
}

func keysWithin(m map[string]string) error {
	for k := range m {
		if err := within("argument name", k, maxKeyBytes); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) uriWithin(uri string) error {
	if n := s.cat.MaxURIBytes(); n >= 0 {
		return within("URI", uri, n)
	}
	return nil
}

// boundError returns err with its message and data bounded (quote.Message,
// boundData), or err itself when both are within bounds. A wire error is
// copied; any other error is wrapped, so that errors.Is and errors.As, and
// the SDK's choice of code, still see through it.
func boundError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we == err {
		msg, data := quote.Message(we.Message), boundData(we.Data)
		if msg == we.Message && bytes.Equal(data, we.Data) {
			return err
		}
		return &jsonrpc.Error{Code: we.Code, Message: msg, Data: data}
	}
	text := err.Error()
	if msg := quote.Message(text); msg != text {
		return &boundedError{err: err, msg: msg}
	}
	return err
}

// alreadyCut reports whether str is what boundData made of a longer
// string: bounding twice (the middleware, then echoBound on the SDK's
// output) must not cut the marker of the first cut.
func alreadyCut(str string) bool {
	rest, ok := strings.CutSuffix(str[quote.Most:], " bytes)")
	if !ok {
		return false
	}
	n, ok := strings.CutPrefix(rest, "...(")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

type boundedError struct {
	err error
	msg string
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// boundData bounds an error's data as quote.Name bounds a name: each
// string member of an object longer than quote.Most bytes is cut and
// followed by its length ("uri" in a resource-not-found, which MCP asks
// for), and any other member longer than maxErrorData dropped. Data that
// is not an object, and is longer than maxErrorData, is dropped whole.
func boundData(data json.RawMessage) json.RawMessage {
	if len(data) <= quote.Most+2 {
		return data // no string in it can be too long
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		if len(data) > maxErrorData {
			return nil
		}
		return data
	}
	changed := false
	for k, v := range m {
		var str string
		switch {
		case json.Unmarshal(v, &str) == nil && len(str) > quote.Most && !alreadyCut(str):
			b, _ := json.Marshal(str[:quote.Most] + fmt.Sprintf("...(%d bytes)", len(str)))
			m[k], changed = b, true
		case len(v) > maxErrorData:
			delete(m, k)
			changed = true
		}
	}
	if !changed {
		return data
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return out
}
