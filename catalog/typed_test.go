package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
)

type addIn struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func add(_ context.Context, _ catalog.Call, in addIn) (addOut, error) {
	return addOut{Sum: in.A + in.B}, nil
}

// TestTypedToolInfersSchemasAndFillsStructuredContent: the schemas come from
// the Go types, the arguments are decoded, the output is structured content
// with the same JSON as text, and bad arguments never reach the body.
func TestTypedToolInfersSchemasAndFillsStructuredContent(t *testing.T) {
	var runs atomic.Int64
	tool, h, err := catalog.TypedToolOf(catalog.Tool{Name: "add"}, func(ctx context.Context, c catalog.Call, in addIn) (addOut, error) {
		runs.Add(1)
		return add(ctx, c, in)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(`{"type":"object","properties":{"a":{"type":"integer","description":"the first addend"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`, string(tool.InputSchema)) {
		t.Errorf("JSON %s, want %s", string(tool.InputSchema), `{"type":"object","properties":{"a":{"type":"integer","description":"the first addend"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)
	}
	if !jsonEqual(`{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"],"additionalProperties":false}`, string(tool.OutputSchema)) {
		t.Errorf("JSON %s, want %s", string(tool.OutputSchema), `{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"],"additionalProperties":false}`)
	}

	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, tool, public, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(bg) })
	if got := c.Tools().List()[0].InputSchema; !reflect.DeepEqual(got, tool.InputSchema) {
		t.Errorf("listed with the inferred schema: c.Tools().List()[0].InputSchema = %v, want %v", got, tool.InputSchema)
	}

	res, err := c.CallTool(bg, "add", json.RawMessage(`{"a":2,"b":3}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(`{"sum":5}`, string(res.StructuredContent.(json.RawMessage))) {
		t.Errorf("JSON %s, want %s", string(res.StructuredContent.(json.RawMessage)), `{"sum":5}`)
	}
	if got := len(res.Content); got != 1 {
		t.Fatalf("len(res.Content) = %d, want %d", got, 1)
	}
	if !jsonEqual(`{"sum":5}`, res.Content[0].Text) {
		t.Errorf("JSON %s, want %s", res.Content[0].Text, `{"sum":5}`)
	}

	for _, bad := range []string{`{"a":2}`, `{"a":"2","b":3}`, `{"a":2,"b":3,"c":4}`, `42`} {
		_, err := c.CallTool(bg, "add", json.RawMessage(bad), "")
		if !errors.Is(err, catalog.ErrInvalidArguments) {
			t.Errorf("%v: err = %v, want catalog.ErrInvalidArguments", bad, err)
		}
	}
	if got := runs.Load(); got != int64(1) {
		t.Errorf("the body ran on refused arguments: runs.Load() = %v, want %v", got, int64(1))
	}
}

// TestTypedToolHandSchemaWins: a schema given in the Tool is used as given.
func TestTypedToolHandSchemaWins(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","maximum":10}}}`)
	out := json.RawMessage(`{"type":"object"}`)
	tool, _, err := catalog.TypedToolOf(catalog.Tool{Name: "add", InputSchema: in, OutputSchema: out}, add)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tool.InputSchema, in) {
		t.Errorf("tool.InputSchema = %v, want %v", tool.InputSchema, in)
	}
	if !reflect.DeepEqual(tool.OutputSchema, out) {
		t.Errorf("tool.OutputSchema = %v, want %v", tool.OutputSchema, out)
	}
}

type noSchema struct {
	C chan int `json:"c"`
}

// TestTypedToolRefusesTypesWithoutASchema: types that cannot have a schema,
// or whose schema is not an object, fail at construction, not at call time.
func TestTypedToolRefusesTypesWithoutASchema(t *testing.T) {
	tests := []struct {
		name string
		make func() error
	}{
		{"channel input", func() error {
			_, _, err := catalog.TypedToolOf(catalog.Tool{Name: "t"}, func(context.Context, catalog.Call, chan int) (addOut, error) { return addOut{}, nil })
			return err
		}},
		{"func field", func() error {
			_, _, err := catalog.TypedToolOf(catalog.Tool{Name: "t"}, func(context.Context, catalog.Call, noSchema) (addOut, error) { return addOut{}, nil })
			return err
		}},
		{"func output", func() error {
			_, _, err := catalog.TypedToolOf(catalog.Tool{Name: "t"}, func(context.Context, catalog.Call, addIn) (func(), error) { return nil, nil })
			return err
		}},
		{"integer input", func() error {
			_, _, err := catalog.TypedToolOf(catalog.Tool{Name: "t"}, func(context.Context, catalog.Call, int) (addOut, error) { return addOut{}, nil })
			return err
		}},
		{"string output", func() error {
			_, _, err := catalog.TypedToolOf(catalog.Tool{Name: "t"}, func(context.Context, catalog.Call, addIn) (string, error) { return "", nil })
			return err
		}},
		{"nil handler", func() error {
			_, _, err := catalog.TypedToolOf[addIn, addOut](catalog.Tool{Name: "t"}, nil)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.make()
			if !errors.Is(err, catalog.ErrInvalidRoute) {
				t.Errorf("err = %v, want catalog.ErrInvalidRoute", err)
			}
		})
	}
}

// TestTypedToolOutputs: a nil pointer output is the zero value, an any
// output declares no schema, and a handler error reaches the caller.
func TestTypedToolOutputs(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	start := func(tool catalog.Tool, h catalog.ToolHandler, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.StartTool(bg, tool, public, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(bg) })
	}
	start(catalog.TypedToolOf(catalog.Tool{Name: "nilptr"}, func(context.Context, catalog.Call, struct{}) (*addOut, error) { return nil, nil }))
	res, err := c.CallTool(bg, "nilptr", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(`{"sum":0}`, string(res.StructuredContent.(json.RawMessage))) {
		t.Errorf("JSON %s, want %s", string(res.StructuredContent.(json.RawMessage)), `{"sum":0}`)
	}

	tool, h, err := catalog.TypedToolOf(catalog.Tool{Name: "untyped"}, func(context.Context, catalog.Call, any) (any, error) { return nil, nil })
	if len(tool.OutputSchema) != 0 {
		t.Errorf("tool.OutputSchema = %v, want empty", tool.OutputSchema)
	}
	start(tool, h, err)
	res, err = c.CallTool(bg, "untyped", json.RawMessage(`{"anything":true}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.StructuredContent != nil {
		t.Errorf("res.StructuredContent = %v, want nil", res.StructuredContent)
	}

	boom := errors.New("boom")
	start(catalog.TypedToolOf(catalog.Tool{Name: "fails"}, func(context.Context, catalog.Call, addIn) (addOut, error) { return addOut{}, boom }))
	_, err = c.CallTool(bg, "fails", json.RawMessage(`{"a":1,"b":1}`), "")
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}

	// A schema by hand that accepts what In cannot hold.
	start(catalog.TypedToolOf(catalog.Tool{Name: "mismatch", InputSchema: json.RawMessage(`{"type":"object"}`)}, add))
	_, err = c.CallTool(bg, "mismatch", json.RawMessage(`{"a":"one"}`), "")
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Errorf("err = %v, want catalog.ErrInvalidArguments", err)
	}
}

// TestCallWithClient: a body's progress and log messages reach the client
// an in-process caller passes, in order; without one they are dropped.
func TestCallWithClient(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "slow", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		for i := 1; i <= 3; i++ {
			if err := call.ReportProgress(ctx, catalog.Progress{Progress: float64(i), Total: 3}); err != nil {
				return catalog.Result{}, err
			}
		}
		return catalog.TextResult("done"), call.Log(ctx, slog.LevelInfo, "finished")
	})
	var got []string
	cl := &catalog.Client{
		Progress: func(_ context.Context, p catalog.Progress) error {
			got = append(got, "progress "+string(rune('0'+int(p.Progress))))
			return nil
		},
		Log: func(_ context.Context, m catalog.LogMessage) error {
			got = append(got, m.Level.String()+" "+m.Data.(string))
			return nil
		},
	}
	_, err := c.CallTool(bg, "slow", nil, "", catalog.WithClient(cl))
	if err != nil {
		t.Fatal(err)
	}
	if want := ([]string{"progress 1", "progress 2", "progress 3", "INFO finished"}); !reflect.DeepEqual(got, want) {
		t.Errorf("got = %v, want %v", got, want)
	}

	_, err = c.CallTool(bg, "slow", nil, "")
	if err != nil {
		t.Fatalf("without a client, reports are dropped: %v", err)
	}
	_, err = c.CallTool(bg, "slow", nil, "", catalog.WithClient(&catalog.Client{}))
	if err != nil {
		t.Fatalf("a client that takes nothing: %v", err)
	}
}

type defaultsIn struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
	Big   int64  `json:"big,omitempty"`
	Opts  struct {
		Loud bool   `json:"loud,omitempty"`
		Mark string `json:"mark,omitempty"`
	} `json:"opts"`
}

// TestTypedToolAppliesSchemaDefaults: properties the arguments leave out
// get the defaults the input schema declares, nested ones too; what the
// client sent wins, required properties get none, and large integers are
// not rounded on the way.
func TestTypedToolAppliesSchemaDefaults(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["name"],"properties":{
		"name":{"type":"string","default":"never"},
		"count":{"type":"integer","default":3},
		"big":{"type":"integer"},
		"opts":{"type":"object","properties":{"loud":{"type":"boolean","default":true},"mark":{"type":"string","default":"!"}}}}}`)
	got := make(chan defaultsIn, 1)
	tool, h, err := catalog.TypedToolOf(catalog.Tool{Name: "defaults", InputSchema: schema},
		func(_ context.Context, _ catalog.Call, in defaultsIn) (any, error) { got <- in; return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, tool, public, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(bg) })

	tests := []struct {
		args string
		want string
	}{
		{`{"name":"a"}`, `{"name":"a","count":3,"opts":{"loud":true,"mark":"!"}}`},
		{`{"name":"b","count":0,"opts":{"mark":"?"}}`, `{"name":"b","opts":{"loud":true,"mark":"?"}}`},
		{`{"name":"c","count":9,"big":9007199254740993,"opts":{"loud":false,"mark":""}}`, `{"name":"c","count":9,"big":9007199254740993,"opts":{}}`},
	}
	for _, tt := range tests {
		_, err := c.CallTool(bg, "defaults", json.RawMessage(tt.args), "")
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		in := <-got
		raw, _ := json.Marshal(in)
		if !jsonEqual(tt.want, string(raw)) {
			t.Errorf("%v: JSON %s, want %s", tt.args, string(raw), tt.want)
		}
		if in.Big != 0 {
			// JSONEq compares numbers as float64, which cannot tell.
			if in.Big != int64(9007199254740993) {
				t.Errorf("a large integer rounded: in.Big = %v, want int64(9007199254740993)", in.Big)
			}
		}
	}
	_, err = c.CallTool(bg, "defaults", json.RawMessage(`{"count":1}`), "")
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Errorf("a required property is not defaulted: err = %v, want catalog.ErrInvalidArguments", err)
	}

	// A default its property's schema refuses stops the tool at
	// construction.
	_, _, err = catalog.TypedToolOf(catalog.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`)}, add)
	if !errors.Is(err, catalog.ErrInvalidRoute) {
		t.Errorf("err = %v, want catalog.ErrInvalidRoute", err)
	}
}

// StartTypedTool starts the typed tool in one call: it lists with the
// inferred schemas and answers with structured content; a type without a
// schema starts nothing.
func TestStartTypedTool(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k, err := catalog.StartTypedTool(bg, c, catalog.Tool{Name: "add"}, public, add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(bg) })
	listed := c.Tools().List()
	if got := len(listed); got != 1 {
		t.Fatalf("len(listed) = %d, want %d", got, 1)
	}
	if got := string(listed[0].InputSchema); !strings.Contains(got, `"a"`) {
		t.Errorf("string(listed[0].InputSchema) = %q, want it to contain %q", got, `"a"`)
	}
	if got := string(listed[0].OutputSchema); !strings.Contains(got, `"sum"`) {
		t.Errorf("string(listed[0].OutputSchema) = %q, want it to contain %q", got, `"sum"`)
	}
	res, err := c.CallTool(bg, "add", json.RawMessage(`{"a":2,"b":3}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(`{"sum":5}`, string(res.StructuredContent.(json.RawMessage))) {
		t.Errorf("JSON %s, want %s", string(res.StructuredContent.(json.RawMessage)), `{"sum":5}`)
	}

	_, err = catalog.StartTypedTool(bg, c, catalog.Tool{Name: "bad"}, public,
		func(context.Context, catalog.Call, chan int) (addOut, error) { return addOut{}, nil })
	if !errors.Is(err, catalog.ErrInvalidRoute) {
		t.Fatalf("err = %v, want catalog.ErrInvalidRoute", err)
	}
	if got := c.Stats().ToolSlots; got != 1 {
		t.Errorf("nothing started: c.Stats().ToolSlots = %v, want 1", got)
	}
}
