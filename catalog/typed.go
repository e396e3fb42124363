package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	segjson "github.com/segmentio/encoding/json"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/strictjson"
)

// TypedHandler is a typed tool's body: it gets the call's arguments decoded
// into In (after the input schema accepted them) and returns its output,
// which becomes the result's structured content. It runs as a ToolHandler
// does. An error it returns reaches the caller as a ToolHandler's does
// (package mcpserve sends it to the model as a tool error).
type TypedHandler[In, Out any] func(ctx context.Context, c Call, in In) (Out, error)

// StartTypedTool starts, in one call, a consumer of cat serving tool t under
// plan p, whose arguments are an In and whose output is an Out, as the MCP
// Go SDK's AddTool does; it is StartTool with a handler built from h:
//
//   - t.InputSchema, if empty, is inferred from In, and t.OutputSchema, if
//     empty, from Out, with github.com/google/jsonschema-go (struct fields
//     by their json tags; a jsonschema tag describes a field). A schema
//     given in t wins. Out = any declares no output schema.
//   - In (or what it points to) must infer to an object: a struct or a
//     map with string keys; so must Out, unless it is any. Otherwise, or
//     for a type with no schema (a channel, a func), StartTypedTool returns
//     ErrInvalidRoute and nothing is started.
//   - The handler fills in the input schema's defaults for the properties
//     the arguments leave out (see schema.go's comment on defaults; an
//     inferred schema has none, so give a schema with "default" by hand),
//     decodes the arguments, which CallTool has checked against the input
//     schema, into a fresh In (absent arguments leave it zero), calls h,
//     and returns h's output as StructuredContent (as JSON) with the same
//     JSON as a text item, for clients that predate structured content.
//     CallTool checks it against the output schema.
//   - In receives exactly the object the schema judged: arguments with
//     two names equal once case is folded ({"role":"viewer",
//     "ROLE":"admin"}), or otherwise outside internal/strictjson's rules,
//     are refused with ErrInvalidArguments before h runs, and names are
//     matched to In's fields by case, as the schema and the MCP Go SDK's
//     AddTool match them (encoding/json would fold ROLE onto role).
//
// The schemas are inferred once, at start; a call costs a decoding of the
// arguments and an encoding of the output, and, when the input schema
// declares defaults, a decoding and an encoding more to fill them in, and
// one strict pass over the arguments. Start errors and options are
// StartTool's. It is safe for concurrent use, and calls to the tool are as
// safe as h is.
func StartTypedTool[In, Out any](ctx context.Context, cat *Catalog, t Tool, p bindsec.Plan, h TypedHandler[In, Out], opts ...StartOption) (*Consumer, error) {
	t, body, err := typedTool(t, h)
	if err != nil {
		return nil, err
	}
	return cat.StartTool(ctx, t, p, body, opts...)
}

// typedTool returns the Tool and ToolHandler that StartTool takes for
// StartTypedTool's t and h.
func typedTool[In, Out any](t Tool, h TypedHandler[In, Out]) (Tool, ToolHandler, error) {
	fail := func(err error) (Tool, ToolHandler, error) {
		return Tool{}, nil, fmt.Errorf("catalog: typed tool %q: %w: %w", t.Name, ErrInvalidRoute, err)
	}
	if h == nil {
		return fail(fmt.Errorf("nil handler"))
	}
	if len(t.InputSchema) == 0 {
		s, err := inferObject[In]()
		if err != nil {
			return fail(fmt.Errorf("input type %v: %w", reflect.TypeFor[In](), err))
		}
		t.InputSchema = s
	}
	// A nil *T output encodes as null; the zero T is what it means.
	var outZero any
	hasOut := reflect.TypeFor[Out]() != reflect.TypeFor[any]()
	if hasOut {
		if rt := reflect.TypeFor[Out](); rt.Kind() == reflect.Pointer {
			outZero = reflect.Zero(rt.Elem()).Interface()
		}
		if len(t.OutputSchema) == 0 {
			s, err := inferObject[Out]()
			if err != nil {
				return fail(fmt.Errorf("output type %v: %w", reflect.TypeFor[Out](), err))
			}
			t.OutputSchema = s
		}
	}
	defaults, err := defaultsOf(t.InputSchema)
	if err != nil {
		return fail(fmt.Errorf("input schema: %w", err))
	}
	body := func(ctx context.Context, c Call) (Result, error) {
		var in In
		args := c.Arguments
		// In receives exactly the object the schema judged: names that
		// two decoders could read two ways (a duplicate, a case variant
		// that encoding/json would fold onto a field) are refused, and
		// the decoding matches names by case, as the schema does.
		if len(args) > 0 {
			if err := strictjson.Check(args); err != nil {
				return Result{}, &schemaError{sentinel: ErrInvalidArguments, name: c.Name, cause: err}
			}
		}
		if defaults != nil {
			var err error
			if args, err = withDefaults(defaults, args); err != nil {
				return Result{}, &schemaError{sentinel: ErrInvalidArguments, name: c.Name, cause: err}
			}
		}
		if len(args) > 0 {
			if _, err := segjson.Parse(args, &in, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
				// The schema accepted what In cannot hold: a schema given
				// by hand that does not match In.
				return Result{}, &schemaError{sentinel: ErrInvalidArguments, name: c.Name, cause: err}
			}
		}
		out, err := h(ctx, c, in)
		if err != nil {
			return Result{}, err
		}
		var v any = out
		if outZero != nil && reflect.ValueOf(out).IsNil() {
			v = outZero
		}
		if !hasOut && v == nil {
			return Result{Content: []Content{}}, nil
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return Result{}, fmt.Errorf("catalog: tool %q: encoding its output: %w", c.Name, err)
		}
		return Result{
			Content:           []Content{{Type: TypeText, Text: string(raw)}},
			StructuredContent: json.RawMessage(raw),
		}, nil
	}
	return t, body, nil
}

// inferObject infers T's schema (that of the type T points to, if T is a
// pointer) and checks that it describes an object.
func inferObject[T any]() (json.RawMessage, error) {
	rt := reflect.TypeFor[T]()
	if rt == reflect.TypeFor[any]() {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("its schema is not an object (type %q): MCP arguments and structured content are JSON objects", s.Type)
	}
	return json.Marshal(s)
}

// TypedTool is the first half of StartTypedTool: t with its schemas
// inferred from In and Out, and the handler that decodes, validates and
// encodes around h, for a caller that starts them itself (a table of
// routes started in a loop, a benchmark of the handler alone). Its errors
// are StartTypedTool's before the start. Most servers want StartTypedTool.
func TypedTool[In, Out any](t Tool, h TypedHandler[In, Out]) (Tool, ToolHandler, error) {
	return typedTool(t, h)
}
