package mcpserve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The Mcp-Param headers of SEP-2243 against the arguments they repeat, as
// the SDK judges them for its own tools.
func TestParamHeadersMatch(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"dry":{"type":"boolean","x-mcp-header":"Dry"},
		"opts":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}},
		"plain":{"type":"string"}}}`)
	ph := paramHeadersOf(schema)
	if len(ph) != 4 {
		t.Fatalf("paramHeadersOf found %d marked arguments, want 4: %v", len(ph), ph)
	}
	for _, tt := range []struct {
		name    string
		args    string
		headers map[string]string
		err     string // a part of the refusal; "" for none
	}{
		{"no marked argument, no header", `{"plain":"x"}`, nil, ""},
		{"literal", `{"region":"eu-west"}`, map[string]string{"Region": "eu-west"}, ""},
		{"Base64", `{"region":"Hello"}`, map[string]string{"Region": "=?base64?SGVsbG8=?="}, ""},
		{"Base64 of non-ASCII", `{"region":"Zürich"}`, map[string]string{"Region": "=?base64?WsO8cmljaA==?="}, ""},
		{"no prefix: literal", `{"region":"SGVsbG8="}`, map[string]string{"Region": "SGVsbG8="}, ""},
		{"no suffix: literal", `{"region":"=?base64?SGVsbG8="}`, map[string]string{"Region": "=?base64?SGVsbG8="}, ""},
		{"unpadded Base64", `{"region":"Hello"}`, map[string]string{"Region": "=?base64?SGVsbG8?="}, "invalid Base64"},
		{"Base64 outside the alphabet", `{"region":"Hello"}`, map[string]string{"Region": "=?base64?SGVs!!!bG8=?="}, "invalid Base64"},
		{"missing header", `{"region":"eu"}`, nil, "missing Mcp-Param-Region"},
		{"header for an absent argument", `{}`, map[string]string{"Region": "eu"}, "unexpected Mcp-Param-Region"},
		{"header for a null argument", `{"region":null}`, map[string]string{"Region": "eu"}, "unexpected Mcp-Param-Region"},
		{"null argument, no header", `{"region":null}`, nil, ""},
		{"different value", `{"region":"eu"}`, map[string]string{"Region": "us"}, "does not match"},
		{"integer", `{"count":42}`, map[string]string{"Count": "42"}, ""},
		{"integer written as a float", `{"count":42}`, map[string]string{"Count": "42.0"}, ""},
		{"integer mismatch", `{"count":42}`, map[string]string{"Count": "43"}, "does not match"},
		{"integer past 2^53", `{"count":9007199254740993}`, map[string]string{"Count": "9007199254740993"}, "not a primitive"},
		{"a fraction is no integer", `{"count":1.5}`, map[string]string{"Count": "1.5"}, "not a primitive"},
		{"boolean", `{"dry":true}`, map[string]string{"Dry": "true"}, ""},
		{"boolean in capitals", `{"dry":true}`, map[string]string{"Dry": "True"}, "does not match"},
		{"nested", `{"opts":{"zone":"b"}}`, map[string]string{"Zone": "b"}, ""},
		{"nested, missing header", `{"opts":{"zone":"b"}}`, nil, "missing Mcp-Param-Zone"},
		{"an object for a string", `{"region":{"a":1}}`, map[string]string{"Region": "x"}, "not a primitive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var args map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set("Mcp-Param-"+k, v)
			}
			err := paramHeadersMatch(h, args, ph)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("got %v, want a refusal saying %q", err, tt.err)
			}
		})
	}
}
