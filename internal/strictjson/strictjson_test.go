package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/internal/strictjson"
)

// cases are the review's inputs and their neighbours: each with the
// sentinel Check must refuse it with, or nil.
func cases() []struct {
	name string
	data string
	want error
} {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		b.WriteString(`"` + last + `":2}`)
		return b.String()
	}
	return []struct {
		name string
		data string
		want error
	}{
		{"a request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2.5,-0,1e3,"x",true,false,null]}}}`, nil},
		{"escaped method", `{"method":"tools\/call"}`, nil},
		{"white space around", " \t\r\n{}\n ", nil},
		{"a batch", `[{"id":1},{"id":2}]`, nil},
		{"a surrogate pair", `"\ud83d\ude00"`, nil},
		{"non-ASCII names apart", `{"é":1,"e":2}`, nil},
		{"underflow is zero", `1e-400`, nil},
		{"same name in sibling objects", `{"a":{"x":1},"b":{"x":1}}`, nil},
		{"same name at two depths", `{"x":{"x":{"x":1}}}`, nil},
		{"large object", many(40, "other"), nil},
		{"deep enough", strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth), nil},

		{"empty", ``, strictjson.ErrSyntax},
		{"malformed", `{"a":1`, strictjson.ErrSyntax},
		{"a bare word", `nul`, strictjson.ErrSyntax},
		{"leading zero", `01`, strictjson.ErrSyntax},
		{"a dot with no digits", `1.`, strictjson.ErrSyntax},
		{"a trailing comma", `{"a":1,}`, strictjson.ErrSyntax},
		{"trailing data", `{"id":1} x`, strictjson.ErrTrailing},
		{"trailing id 1.5", `{"jsonrpc":"2.0","id":1.5,"method":"ping"} x`, strictjson.ErrTrailing},
		{"a second value", `{} {}`, strictjson.ErrTrailing},
		{"a trailing batch", `[{"id":1}] x`, strictjson.ErrTrailing},
		{"duplicate key", `{"a":1,"a":2}`, strictjson.ErrDuplicateKey},
		{"duplicate method", `{"method":"tools/list","method":"tools/call"}`, strictjson.ErrDuplicateKey},
		{"case variant", `{"role":"viewer","ROLE":"admin"}`, strictjson.ErrDuplicateKey},
		{"case variant in params", `{"params":{"name":"a","Name":"b"}}`, strictjson.ErrDuplicateKey},
		{"duplicate nested", `{"params":{"arguments":{"x":{"deep":1,"deep":2}}}}`, strictjson.ErrDuplicateKey},
		{"duplicate in an array", `[{"a":1},{"b":1,"b":2}]`, strictjson.ErrDuplicateKey},
		{"escaped duplicate", `{"role":1,"r\u006fle":2}`, strictjson.ErrDuplicateKey},
		{"escaped case variant", `{"role":1,"\u0052OLE":2}`, strictjson.ErrDuplicateKey},
		{"non-ASCII case variant", `{"é":1,"É":2}`, strictjson.ErrDuplicateKey},
		{"Kelvin sign folds to k", "{\"k\":1,\"\u212a\":2}", strictjson.ErrDuplicateKey},
		{"duplicate in a large object", many(40, "kxxx"), strictjson.ErrDuplicateKey},
		{"case variant in a large object", many(40, "KXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"), strictjson.ErrDuplicateKey},
		{"lone high surrogate", `{"id":"\ud800"}`, strictjson.ErrString},
		{"lone low surrogate", `"\udc00"`, strictjson.ErrString},
		{"high then not low", `"\ud800\u0041"`, strictjson.ErrString},
		{"invalid UTF-8", "\"\xff\"", strictjson.ErrString},
		{"control character", "\"a\nb\"", strictjson.ErrString},
		{"bad escape", `"\x"`, strictjson.ErrString},
		{"overflow", `{"id":1e999}`, strictjson.ErrNumber},
		{"negative overflow", `-1e999`, strictjson.ErrNumber},
		{"overflow by digits", strings.Repeat("9", 400), strictjson.ErrNumber},
		{"too deep", strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1), strictjson.ErrDepth},
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range cases() {
		t.Run(tt.name, func(t *testing.T) {
			err := strictjson.Check([]byte(tt.data))
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			var se *strictjson.Error
			require.ErrorAs(t, err, &se)
			assert.LessOrEqual(t, len(err.Error()), 200, "the error quotes at most 64 bytes of the input")
		})
	}
}

// TestCheckQuotesLittle: a refusal quotes at most quote.Most bytes of
// a long name or trailing text.
func TestCheckQuotesLittle(t *testing.T) {
	long := strings.Repeat("n", 10000)
	for _, data := range []string{
		`{"` + long + `":1,"` + long + `":2}`,
		`{} ` + long,
		`1e` + strings.Repeat("9", 10000),
	} {
		err := strictjson.Check([]byte(data))
		require.Error(t, err)
		assert.Less(t, len(err.Error()), 200)
	}
}

func TestCheckAllocates(t *testing.T) {
	if raceOn {
		t.Skip("the race detector empties sync.Pool at random")
	}
	data := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi","n":[1,2,3]},"_meta":{"progressToken":"p"}}}`)
	require.NoError(t, strictjson.Check(data))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = strictjson.Check(data) }))
}

// FuzzCheck holds Check to encoding/json: what Check accepts, encoding/json
// accepts, with no two names of an object equal under case folding;
// what encoding/json accepts and Check refuses breaks a rule of I-JSON or
// of names, never one of syntax.
func FuzzCheck(f *testing.F) {
	for _, tt := range cases() {
		f.Add([]byte(tt.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := strictjson.Check(data)
		valid := json.Valid(data)
		if err == nil {
			require.True(t, valid, "Check accepted what encoding/json refuses")
			require.False(t, foldedDuplicate(t, data), "Check accepted a duplicate name")
			return
		}
		if valid {
			for _, syntax := range []error{strictjson.ErrSyntax, strictjson.ErrTrailing} {
				require.NotErrorIs(t, err, syntax, "Check refused valid JSON as malformed")
			}
		}
	})
}

// foldedDuplicate walks data with encoding/json's tokenizer and reports
// whether an object has two names equal under case folding.
func foldedDuplicate(t *testing.T, data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		key    bool // the next string is a name
		names  []string
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		require.NoError(t, err)
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			for _, n := range top.names {
				if strings.EqualFold(n, s) {
					return true
				}
			}
			top.names = append(top.names, s)
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// BenchmarkCheck is Check's cost on a tools/call as BenchmarkFastPath
// in package mcpserve sends it, on a 2026-07-28 one with its _meta, and
// on 4 KiB of arguments in 64 names.
func BenchmarkCheck(b *testing.B) {
	var args strings.Builder
	for i := range 64 {
		if i > 0 {
			args.WriteString(",")
		}
		args.WriteString(`"name` + strings.Repeat("x", i%8) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":"` + strings.Repeat("v", 48) + `"`)
	}
	for _, bc := range []struct{ name, body string }{
		{"call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"}}}`},
		{"call-2026", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ok"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
			`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`},
		{"args-4KiB", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{` + args.String() + `}}}`},
	} {
		data := []byte(bc.body)
		require.NoError(b, strictjson.Check(data))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				_ = strictjson.Check(data)
			}
		})
	}
}
