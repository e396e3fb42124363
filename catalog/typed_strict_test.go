package catalog_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/strictjson"
)

type roleIn struct {
	Role string `json:"role"`
}

// TestTypedToolGetsWhatTheSchemaJudged: with a schema written by hand
// (role's enum is ["viewer"], other names allowed, role optional), the
// body receives exactly the object the schema judged. A case variant
// beside the name is refused before the body runs; a case variant alone
// is a name the schema saw as another, and never reaches the field.
func TestTypedToolGetsWhatTheSchemaJudged(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"role":{"type":"string","enum":["viewer"]}}}`)
	var got []string
	tool, h, err := catalog.TypedToolOf(catalog.Tool{Name: "whoami", InputSchema: schema},
		func(_ context.Context, _ catalog.Call, in roleIn) (any, error) {
			got = append(got, in.Role)
			return nil, nil
		})
	require.NoError(t, err)
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, tool, public, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Stop(bg) })

	tests := []struct {
		name string
		args string
		want error  // nil: the body runs
		role string // what the body receives
	}{
		{"viewer", `{"role":"viewer"}`, nil, "viewer"},
		{"admin", `{"role":"admin"}`, catalog.ErrInvalidArguments, ""},
		{"case variant beside", `{"role":"viewer","ROLE":"admin"}`, strictjson.ErrDuplicateKey, ""},
		{"case variant first", `{"Role":"admin","role":"viewer"}`, strictjson.ErrDuplicateKey, ""},
		{"duplicate", `{"role":"admin","role":"viewer"}`, strictjson.ErrDuplicateKey, ""},
		{"escaped case variant", `{"role":"viewer","\u0052ole":"admin"}`, strictjson.ErrDuplicateKey, ""},
		{"case variant alone", `{"ROLE":"admin"}`, nil, ""},
		{"trailing data", `{"role":"viewer"} {"role":"admin"}`, catalog.ErrInvalidArguments, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			_, err := c.CallTool(bg, "whoami", json.RawMessage(tt.args), "")
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				require.ErrorIs(t, err, catalog.ErrInvalidArguments)
				assert.Empty(t, got, "the body ran")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{tt.role}, got)
		})
	}
}
