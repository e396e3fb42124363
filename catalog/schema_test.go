package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
)

// runCounter answers "ran" and counts its runs.
func runCounter(runs *atomic.Int64) catalog.ToolHandler {
	return func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.TextResult("ran"), nil
	}
}

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name"]}`

// TestArgumentsValidatedBeforeTheBody: every call's arguments are checked
// against the tool's schema, compiled at start; a refused call fails with
// ErrInvalidArguments and its body does not run.
func TestArgumentsValidatedBeforeTheBody(t *testing.T) {
	tests := []struct {
		name   string
		schema string // "" is the default, {"type":"object"}
		args   string // "" is absent
		ok     bool
		msg    string // in the error, when not ok
	}{
		{"default schema, absent", "", "", true, ""},
		{"default schema, null", "", "null", true, ""},
		{"default schema, object", "", ` {"x":1}`, true, ""},
		{"default schema, number", "", "42", false, "not a JSON object"},
		{"default schema, string", "", `"x"`, false, "not a JSON object"},
		{"default schema, array", "", `[]`, false, "not a JSON object"},
		{"default schema, truncated", "", `{"x":`, false, "not a JSON object"},
		{"empty schema, number", "{}", "42", false, "not a JSON object"},
		{"properties, good", personSchema, `{"name":"ada","age":36}`, true, ""},
		{"properties, required missing", personSchema, `{"age":36}`, false, "name"},
		{"properties, absent, required missing", personSchema, "", false, "name"},
		{"properties, wrong type", personSchema, `{"name":7}`, false, "name"},
		{"properties, below minimum", personSchema, `{"name":"ada","age":-1}`, false, "age"},
		{"properties, not an object", personSchema, `42`, false, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			var runs atomic.Int64
			k, err := c.StartTool(bg, catalog.Tool{Name: "t", InputSchema: json.RawMessage(tt.schema)}, public, runCounter(&runs))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Stop(bg) })
			var args json.RawMessage
			if tt.args != "" {
				args = json.RawMessage(tt.args)
			}
			_, err = c.CallTool(bg, "t", args, "")
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got := runs.Load(); got != int64(1) {
					t.Errorf("runs.Load() = %v, want %v", got, int64(1))
				}
				return
			}
			if !errors.Is(err, catalog.ErrInvalidArguments) {
				t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
			}
			if got := err.Error(); !strings.Contains(got, tt.msg) {
				t.Errorf("err.Error() = %q, want it to contain %q", got, tt.msg)
			}
			if got := runs.Load(); got != 0 {
				t.Errorf("the body ran on refused arguments: runs.Load() = %v, want 0", got)
			}
			if got := k.Running(); got != 0 {
				t.Errorf("k.Running() = %v, want 0", got)
			}
		})
	}
}

// TestInvalidArgumentsMessageIsBounded: the error quoting a huge argument
// keeps a bounded length.
func TestInvalidArgumentsMessageIsBounded(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startToolSchema(t, c, "t", `{"type":"object","properties":{"s":{"type":"string","enum":["a"]}}}`, reply("ran"))
	huge := `{"s":"` + strings.Repeat("x", 1<<20) + `"}`
	_, err := c.CallTool(bg, "t", json.RawMessage(huge), "")
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
	}
	if got := len(err.Error()); got >= 512 {
		t.Errorf("len(err.Error()) = %v, want < %v", got, 512)
	}
}

// TestDeeplyNestedArguments: a large, deep argument object against a schema
// that recurses is validated, and refused where it breaks the schema.
func TestDeeplyNestedArguments(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startToolSchema(t, c, "t", `{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}},"properties":{"c":{"$ref":"#/$defs/n"}}}`, reply("ran"))
	nest := func(depth int, leaf string) string {
		return strings.Repeat(`{"c":`, depth) + `{"v":` + leaf + `}` + strings.Repeat(`}`, depth)
	}
	_, err := c.CallTool(bg, "t", json.RawMessage(nest(2000, "1")), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CallTool(bg, "t", json.RawMessage(nest(2000, `"x"`)), "")
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
	}
}

func startToolSchema(t *testing.T, c *catalog.Catalog, name, schema string, h catalog.ToolHandler) *catalog.Consumer {
	t.Helper()
	k, err := c.StartTool(bg, catalog.Tool{Name: name, InputSchema: json.RawMessage(schema)}, public, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(bg) })
	return k
}

// TestBadSchemasRefusedAtStart: a schema that does not compile, or that
// refers outside itself, is ErrInvalidRoute, and nothing starts.
func TestBadSchemasRefusedAtStart(t *testing.T) {
	tests := []struct {
		name     string
		in, out  string
		contains string
	}{
		{"remote ref", `{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`, "", "input schema"},
		{"dangling local ref", `{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`, "", "input schema"},
		{"bad pattern", `{"type":"object","properties":{"x":{"type":"string","pattern":"("}}}`, "", "input schema"},
		{"wrong keyword type", `{"type":"object","required":"x"}`, "", "input schema"},
		{"default refused by its own schema", `{"type":"object","properties":{"n":{"type":"integer","default":"x"}}}`, "", "input schema"},
		{"output remote ref", "", `{"$ref":"http://example.com/o.json"}`, "output schema"},
		{"output not JSON", "", `{"type":`, "output schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			v := c.Version()
			tool := catalog.Tool{Name: "t", InputSchema: json.RawMessage(tt.in), OutputSchema: json.RawMessage(tt.out)}
			k, err := c.StartTool(bg, tool, public, reply(""))
			if !errors.Is(err, catalog.ErrInvalidRoute) {
				t.Fatalf("err = %v, want catalog.ErrInvalidRoute", err)
			}
			if got := err.Error(); !strings.Contains(got, tt.contains) {
				t.Errorf("err.Error() = %q, want it to contain %q", got, tt.contains)
			}
			if k != nil {
				t.Errorf("k = %v, want nil", k)
			}
			if got := c.Version(); got != v {
				t.Errorf("a refused start changes nothing: c.Version() = %v, want %v", got, v)
			}
			if got := c.Stats().ToolSlots; got != 0 {
				t.Errorf("c.Stats().ToolSlots = %v, want 0", got)
			}
			_, err = c.CallTool(bg, "t", nil, "")
			if !errors.Is(err, catalog.ErrNotFound) {
				t.Errorf("err = %v, want catalog.ErrNotFound", err)
			}
		})
	}
}

// TestOutputValidated: a tool with an output schema whose result does not
// match it fails with ErrInvalidResult; a matching one, and a tool error,
// pass.
func TestOutputValidated(t *testing.T) {
	const out = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	tests := []struct {
		name string
		res  catalog.Result
		ok   bool
	}{
		{"matching map", catalog.Result{StructuredContent: map[string]any{"n": 1}}, true},
		{"matching raw JSON", catalog.Result{StructuredContent: json.RawMessage(`{"n":2}`)}, true},
		{"matching struct", catalog.Result{StructuredContent: struct {
			N int `json:"n"`
		}{3}}, true},
		{"tool error, unchecked", catalog.ErrorResult("failed"), true},
		{"wrong type", catalog.Result{StructuredContent: map[string]any{"n": "one"}}, false},
		{"required missing", catalog.Result{StructuredContent: map[string]any{}}, false},
		{"none", catalog.TextResult("no structure"), false},
		{"not encodable", catalog.Result{StructuredContent: map[string]any{"n": make(chan int)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			k, err := c.StartTool(bg, catalog.Tool{Name: "t", OutputSchema: json.RawMessage(out)}, public,
				func(context.Context, catalog.Call) (catalog.Result, error) { return tt.res, nil })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Stop(bg) })
			res, err := c.CallTool(bg, "t", nil, "")
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(res, tt.res) {
					t.Errorf("res = %v, want %v", res, tt.res)
				}
				return
			}
			if !errors.Is(err, catalog.ErrInvalidResult) {
				t.Fatalf("err = %v, want catalog.ErrInvalidResult", err)
			}
			if !reflect.DeepEqual(res, catalog.Result{}) {
				t.Errorf("res = %+v, want the zero value", res)
			}
			if errors.Is(err, catalog.ErrInvalidArguments) {
				t.Errorf("errors.Is(err, catalog.ErrInvalidArguments) is true")
			}
		})
	}
}

// TestCallWithoutPropertiesDoesNotAllocate guards the fast path: a tool
// whose schema asks only for an object is checked without allocating.
func TestCallWithoutPropertiesDoesNotAllocate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "t", public, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil })
	cases := []json.RawMessage{nil, json.RawMessage(`{"a":[1,2,{"b":null}]}`)}
	if raceEnabled {
		cases = cases[:1] // json.Valid takes its scanner from a sync.Pool
	}
	for _, args := range cases {
		n := testing.AllocsPerRun(100, func() {
			if _, err := c.CallTool(bg, "t", args, ""); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("allocs per call with %s: n = %v, want 0", args, n)
		}
	}
}
