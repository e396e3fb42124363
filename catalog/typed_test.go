package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{"a":{"type":"integer","description":"the first addend"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`, string(tool.InputSchema))
	assert.JSONEq(t, `{"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"],"additionalProperties":false}`, string(tool.OutputSchema))

	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, tool, public, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(bg) })
	assert.Equal(t, tool.InputSchema, c.Tools().List()[0].InputSchema, "listed with the inferred schema")

	res, err := c.CallTool(bg, "add", json.RawMessage(`{"a":2,"b":3}`), "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":5}`, string(res.StructuredContent.(json.RawMessage)))
	require.Len(t, res.Content, 1)
	assert.JSONEq(t, `{"sum":5}`, res.Content[0].Text)

	for _, bad := range []string{`{"a":2}`, `{"a":"2","b":3}`, `{"a":2,"b":3,"c":4}`, `42`} {
		_, err := c.CallTool(bg, "add", json.RawMessage(bad), "")
		assert.ErrorIs(t, err, catalog.ErrInvalidArguments, bad)
	}
	assert.EqualValues(t, 1, runs.Load(), "the body ran on refused arguments")
}

// TestTypedToolHandSchemaWins: a schema given in the Tool is used as given.
func TestTypedToolHandSchemaWins(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer","maximum":10}}}`)
	out := json.RawMessage(`{"type":"object"}`)
	tool, _, err := catalog.TypedToolOf(catalog.Tool{Name: "add", InputSchema: in, OutputSchema: out}, add)
	require.NoError(t, err)
	assert.Equal(t, in, tool.InputSchema)
	assert.Equal(t, out, tool.OutputSchema)
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
			assert.ErrorIs(t, err, catalog.ErrInvalidRoute)
		})
	}
}

// TestTypedToolOutputs: a nil pointer output is the zero value, an any
// output declares no schema, and a handler error reaches the caller.
func TestTypedToolOutputs(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	start := func(tool catalog.Tool, h catalog.ToolHandler, err error) {
		t.Helper()
		require.NoError(t, err)
		k, err := c.StartTool(bg, tool, public, h)
		require.NoError(t, err)
		t.Cleanup(func() { _ = k.Stop(bg) })
	}
	start(catalog.TypedToolOf(catalog.Tool{Name: "nilptr"}, func(context.Context, catalog.Call, struct{}) (*addOut, error) { return nil, nil }))
	res, err := c.CallTool(bg, "nilptr", nil, "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":0}`, string(res.StructuredContent.(json.RawMessage)))

	tool, h, err := catalog.TypedToolOf(catalog.Tool{Name: "untyped"}, func(context.Context, catalog.Call, any) (any, error) { return nil, nil })
	assert.Empty(t, tool.OutputSchema)
	start(tool, h, err)
	res, err = c.CallTool(bg, "untyped", json.RawMessage(`{"anything":true}`), "")
	require.NoError(t, err)
	assert.Nil(t, res.StructuredContent)

	boom := errors.New("boom")
	start(catalog.TypedToolOf(catalog.Tool{Name: "fails"}, func(context.Context, catalog.Call, addIn) (addOut, error) { return addOut{}, boom }))
	_, err = c.CallTool(bg, "fails", json.RawMessage(`{"a":1,"b":1}`), "")
	assert.ErrorIs(t, err, boom)

	// A schema by hand that accepts what In cannot hold.
	start(catalog.TypedToolOf(catalog.Tool{Name: "mismatch", InputSchema: json.RawMessage(`{"type":"object"}`)}, add))
	_, err = c.CallTool(bg, "mismatch", json.RawMessage(`{"a":"one"}`), "")
	assert.ErrorIs(t, err, catalog.ErrInvalidArguments)
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
	require.NoError(t, err)
	assert.Equal(t, []string{"progress 1", "progress 2", "progress 3", "INFO finished"}, got)

	_, err = c.CallTool(bg, "slow", nil, "")
	require.NoError(t, err, "without a client, reports are dropped")
	_, err = c.CallTool(bg, "slow", nil, "", catalog.WithClient(&catalog.Client{}))
	require.NoError(t, err, "a client that takes nothing")
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
	require.NoError(t, err)
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, tool, public, h)
	require.NoError(t, err)
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
		require.NoError(t, err, tt.args)
		in := <-got
		raw, _ := json.Marshal(in)
		assert.JSONEq(t, tt.want, string(raw), tt.args)
		if in.Big != 0 {
			// JSONEq compares numbers as float64, which cannot tell.
			assert.Equal(t, int64(9007199254740993), in.Big, "a large integer rounded")
		}
	}
	_, err = c.CallTool(bg, "defaults", json.RawMessage(`{"count":1}`), "")
	assert.ErrorIs(t, err, catalog.ErrInvalidArguments, "a required property is not defaulted")

	// A default its property's schema refuses stops the tool at
	// construction.
	_, _, err = catalog.TypedToolOf(catalog.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`)}, add)
	assert.ErrorIs(t, err, catalog.ErrInvalidRoute)
}

// StartTypedTool starts the typed tool in one call: it lists with the
// inferred schemas and answers with structured content; a type without a
// schema starts nothing.
func TestStartTypedTool(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k, err := catalog.StartTypedTool(bg, c, catalog.Tool{Name: "add"}, public, add)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(bg) })
	listed := c.Tools().List()
	require.Len(t, listed, 1)
	assert.Contains(t, string(listed[0].InputSchema), `"a"`)
	assert.Contains(t, string(listed[0].OutputSchema), `"sum"`)
	res, err := c.CallTool(bg, "add", json.RawMessage(`{"a":2,"b":3}`), "")
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":5}`, string(res.StructuredContent.(json.RawMessage)))

	_, err = catalog.StartTypedTool(bg, c, catalog.Tool{Name: "bad"}, public,
		func(context.Context, catalog.Call, chan int) (addOut, error) { return addOut{}, nil })
	require.ErrorIs(t, err, catalog.ErrInvalidRoute)
	assert.Equal(t, 1, c.Stats().ToolSlots, "nothing started")
}
