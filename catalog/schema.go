package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/livereg/livereg/internal/quote"
)

// A tool route's schemas are compiled once, when it starts, with
// github.com/google/jsonschema-go (the library the MCP Go SDK uses), and
// every call is checked against them:
//
//   - the arguments, before the body runs: they must be a JSON object (or
//     absent, which counts as {}) that the input schema accepts, or the
//     call fails with ErrInvalidArguments and the body does not run;
//   - the result, after the body returns, when the tool declares an output
//     schema: a result that is not a tool error must carry
//     StructuredContent the schema accepts, or the call fails with
//     ErrInvalidResult.
//
// A schema that does not compile is ErrInvalidRoute at start. References
// ($ref) resolve within the schema only: a reference to anything outside
// it (a remote URL, a file) is refused at start, and nothing is ever
// fetched, at start or per call.
//
// An input schema that asks for nothing beyond an object ({"type":
// "object"}, the default) is not compiled: its calls are checked with a
// scan of the arguments' first byte and a validity check that allocates
// nothing, so that such tools dispatch as fast as before.

// maxMessage is how many bytes of a validator's message an error keeps: the
// message may quote the arguments, which a client chose.
const maxMessage = 256

// toolSchemas is what a tool route checks its calls against.
type toolSchemas struct {
	in  *jsonschema.Resolved // nil: any object will do
	out *jsonschema.Resolved // nil: the tool declares no output schema
}

// compileTool compiles t's schemas; t.InputSchema is set (StartTool
// defaults it).
func compileTool(t Tool) (toolSchemas, error) {
	var ts toolSchemas
	in, err := parseSchema(t.InputSchema)
	if err != nil {
		return ts, fmt.Errorf("input schema: %w", err)
	}
	if !objectOnly(in) {
		if ts.in, err = in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
			return ts, fmt.Errorf("input schema: %w", err)
		}
	}
	if len(t.OutputSchema) > 0 {
		out, err := parseSchema(t.OutputSchema)
		if err != nil {
			return ts, fmt.Errorf("output schema: %w", err)
		}
		if ts.out, err = out.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
			return ts, fmt.Errorf("output schema: %w", err)
		}
	}
	return ts, nil
}

func parseSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	s := new(jsonschema.Schema)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

// objectOnly reports whether s asks for an object and nothing more.
func objectOnly(s *jsonschema.Schema) bool {
	c := *s
	if len(c.Properties) == 0 {
		c.Properties = nil
	}
	return reflect.DeepEqual(c, jsonschema.Schema{Type: "object"})
}

// checkArgs checks a call's arguments before its body runs. For a tool
// whose schema asks only for an object it allocates nothing.
func (rt *route) checkArgs(args json.RawMessage) error {
	body := bytes.TrimLeft(args, " \t\r\n")
	if len(body) == 0 || isNull(body) {
		if rt.schemas.in == nil {
			return nil
		}
		body = nil
	} else if body[0] != '{' || !json.Valid(body) {
		return rt.invalidArgs(errNotObject)
	} else if rt.schemas.in == nil {
		return nil
	}
	instance := map[string]any{}
	if body != nil {
		if err := json.Unmarshal(body, &instance); err != nil {
			return rt.invalidArgs(err)
		}
	}
	if err := rt.schemas.in.Validate(instance); err != nil {
		return rt.invalidArgs(err)
	}
	return nil
}

func isNull(b []byte) bool { return string(bytes.TrimRight(b, " \t\r\n")) == "null" }

var errNotObject = fmt.Errorf("arguments are not a JSON object")

// checkResult checks a body's result against the tool's output schema. A
// tool error (IsError) is not checked: it reports a failure, not output.
func (rt *route) checkResult(res *Result) error {
	if res.IsError {
		return nil
	}
	if res.StructuredContent == nil {
		return rt.invalidResult(fmt.Errorf("the tool declares an output schema but returned no structured content"))
	}
	raw, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			return rt.invalidResult(err)
		}
	}
	var instance any
	if err := json.Unmarshal(raw, &instance); err != nil {
		return rt.invalidResult(err)
	}
	if err := rt.schemas.out.Validate(instance); err != nil {
		return rt.invalidResult(err)
	}
	return nil
}

func (rt *route) invalidArgs(cause error) error {
	return &schemaError{sentinel: ErrInvalidArguments, name: rt.name, cause: cause}
}

func (rt *route) invalidResult(cause error) error {
	return &schemaError{sentinel: ErrInvalidResult, name: rt.name, cause: cause}
}

// schemaError is ErrInvalidArguments or ErrInvalidResult with the
// validator's error. Its message quotes the tool's name and at most
// maxMessage bytes of the validator's message; both errors are matched
// by errors.Is and errors.As.
type schemaError struct {
	sentinel error
	name     string
	cause    error
}

func (e *schemaError) Error() string {
	return fmt.Sprintf("catalog: tool %s: %v: %s", quote.Name(e.name), e.sentinel, quote.Cut(e.cause.Error(), maxMessage))
}

func (e *schemaError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// Defaults. The JSON Schema specification leaves "default" to the
// application; MCP clients show it, and a typed tool fills it in: an
// argument the call leaves out gets the default its property declares,
// the way jsonschema-go's Resolved.ApplyDefaults reads it (properties
// only, required ones never, nested objects too; no $ref is followed).
// The arguments are validated as the client sent them, then completed;
// StartTool checked every default against its property's schema.

// defaultsOf returns the input schema resolved for ApplyDefaults when a
// property in it (at any depth) declares a default, and nil otherwise.
func defaultsOf(raw json.RawMessage) (*jsonschema.Resolved, error) {
	s, err := parseSchema(raw)
	if err != nil {
		return nil, err
	}
	if !hasPropertyDefaults(s) {
		return nil, nil
	}
	return s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
}

// hasPropertyDefaults reports whether one of s's properties, or of theirs,
// declares a default: the only defaults ApplyDefaults reads.
func hasPropertyDefaults(s *jsonschema.Schema) bool {
	for _, p := range s.Properties {
		if p != nil && (p.Default != nil || hasPropertyDefaults(p)) {
			return true
		}
	}
	return false
}

// withDefaults returns args with rs's defaults filled in. Numbers are kept
// as written (json.Number), so that an int64 beyond 2^53 survives.
func withDefaults(rs *jsonschema.Resolved, args json.RawMessage) (out json.RawMessage, err error) {
	m := map[string]any{}
	if body := bytes.TrimSpace(args); len(body) > 0 && !isNull(body) {
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			return nil, err
		}
	}
	// ApplyDefaults panics when a default cannot be stored; into a
	// map[string]any it always can, but a panic here would kill the
	// consumer, so it is an error instead.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("applying the schema's defaults: %v", p)
		}
	}()
	if err := rs.ApplyDefaults(&m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
