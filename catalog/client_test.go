package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
)

// startAsker starts the public tool "ask", whose body asks its caller
// what ask does and fails with ask's error.
func startAsker(t *testing.T, c *catalog.Catalog, ask func(ctx context.Context, c catalog.Call) error) {
	t.Helper()
	startTool(t, c, bg, "ask", public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		return catalog.TextResult("asked"), ask(ctx, call)
	})
}

func userText(s string) []catalog.SampleMessage {
	return []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: s}}}
}

// TestSampleAndElicitInProcess: a body's requests reach the in-process
// caller's Client as sent, its answers come back to the body, and an
// empty form is sent as an object without properties.
func TestSampleAndElicitInProcess(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var (
		sampled  catalog.SampleResult
		elicited catalog.ElicitResult
	)
	startAsker(t, c, func(ctx context.Context, call catalog.Call) error {
		var err error
		if sampled, err = call.Sample(ctx, catalog.SampleRequest{Messages: userText("hi"), MaxTokens: 10, Model: catalog.ModelPreferences{Hints: []string{"small"}}}); err != nil {
			return err
		}
		elicited, err = call.Elicit(ctx, catalog.ElicitRequest{Message: "sure?"})
		return err
	})
	var gotSample catalog.SampleRequest
	var gotElicit catalog.ElicitRequest
	cl := &catalog.Client{
		Sample: func(_ context.Context, r catalog.SampleRequest) (catalog.SampleResult, error) {
			gotSample = r
			return catalog.SampleResult{Role: catalog.RoleAssistant, Content: catalog.Content{Type: "text", Text: "hello"}, Model: "m"}, nil
		},
		Elicit: func(_ context.Context, r catalog.ElicitRequest) (catalog.ElicitResult, error) {
			gotElicit = r
			return catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{}}, nil
		},
	}
	_, err := c.CallTool(bg, "ask", nil, "", catalog.WithClient(cl))
	require.NoError(t, err)
	assert.Equal(t, "hi", gotSample.Messages[0].Content.Text)
	assert.Equal(t, []string{"small"}, gotSample.Model.Hints)
	assert.Equal(t, "hello", sampled.Content.Text)
	assert.Equal(t, "sure?", gotElicit.Message)
	assert.JSONEq(t, `{"type":"object","properties":{}}`, string(gotElicit.Schema))
	assert.Equal(t, catalog.ElicitAccept, elicited.Action)
}

// TestNotSupported: a caller without a Client, or whose Client lacks the
// function, gives the body ErrNotSupported, matched by errors.Is.
func TestNotSupported(t *testing.T) {
	tests := []struct {
		name string
		opts []catalog.CallOption
	}{
		{"no client", nil},
		{"nil client", []catalog.CallOption{catalog.WithClient(nil)}},
		{"client without the functions", []catalog.CallOption{catalog.WithClient(&catalog.Client{
			Log: func(context.Context, catalog.LogMessage) error { return nil },
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			var sampleErr, elicitErr error
			startAsker(t, c, func(ctx context.Context, call catalog.Call) error {
				_, sampleErr = call.Sample(ctx, catalog.SampleRequest{Messages: userText("hi"), MaxTokens: 1})
				_, elicitErr = call.Elicit(ctx, catalog.ElicitRequest{Message: "m"})
				return errors.Join(sampleErr, elicitErr)
			})
			_, err := c.CallTool(bg, "ask", nil, "", tt.opts...)
			assert.ErrorIs(t, sampleErr, catalog.ErrNotSupported)
			assert.ErrorIs(t, elicitErr, catalog.ErrNotSupported)
			assert.ErrorIs(t, err, catalog.ErrNotSupported, "the body's error reaches the caller")
			assert.Contains(t, sampleErr.Error(), "sampling")
			assert.Contains(t, elicitErr.Error(), "elicitation")
		})
	}
}

// TestInvalidRequestsAreNotSent: malformed requests fail with
// ErrInvalidRequest before the caller's Client sees them.
func TestInvalidRequestsAreNotSent(t *testing.T) {
	tests := []struct {
		name string
		ask  func(ctx context.Context, call catalog.Call) error
		want string
	}{
		{"no messages", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Sample(ctx, catalog.SampleRequest{MaxTokens: 1})
			return err
		}, "no messages"},
		{"no max tokens", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Sample(ctx, catalog.SampleRequest{Messages: userText("x")})
			return err
		}, "MaxTokens"},
		{"bad role", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Sample(ctx, catalog.SampleRequest{MaxTokens: 1, Messages: []catalog.SampleMessage{{Role: "system", Content: catalog.Content{Type: "text"}}}})
			return err
		}, "role"},
		{"resource content", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Sample(ctx, catalog.SampleRequest{MaxTokens: 1, Messages: []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "resource"}}}})
			return err
		}, "content type"},
		{"empty message", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Elicit(ctx, catalog.ElicitRequest{})
			return err
		}, "empty message"},
		{"schema not an object", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Elicit(ctx, catalog.ElicitRequest{Message: "m", Schema: json.RawMessage(`[1]`)})
			return err
		}, "not a JSON object"},
		{"schema not JSON", func(ctx context.Context, call catalog.Call) error {
			_, err := call.Elicit(ctx, catalog.ElicitRequest{Message: "m", Schema: json.RawMessage(`{"type":`)})
			return err
		}, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			startAsker(t, c, tt.ask)
			sent := 0
			cl := &catalog.Client{
				Sample: func(context.Context, catalog.SampleRequest) (catalog.SampleResult, error) {
					sent++
					return catalog.SampleResult{}, nil
				},
				Elicit: func(context.Context, catalog.ElicitRequest) (catalog.ElicitResult, error) {
					sent++
					return catalog.ElicitResult{}, nil
				},
			}
			_, err := c.CallTool(bg, "ask", nil, "", catalog.WithClient(cl))
			assert.ErrorIs(t, err, catalog.ErrInvalidRequest)
			assert.ErrorContains(t, err, tt.want)
			assert.Zero(t, sent, "a malformed request was sent")
		})
	}
}

// TestSampleBoundedByBodyContext: the caller's Client gets the body's
// ctx, so a caller that would never answer holds the body only until that
// ctx ends.
func TestSampleBoundedByBodyContext(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startAsker(t, c, func(ctx context.Context, call catalog.Call) error {
		_, err := call.Sample(ctx, catalog.SampleRequest{Messages: userText("x"), MaxTokens: 1})
		return err
	})
	cl := &catalog.Client{Sample: func(ctx context.Context, _ catalog.SampleRequest) (catalog.SampleResult, error) {
		<-ctx.Done() // never answers
		return catalog.SampleResult{}, ctx.Err()
	}}
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	_, err := c.CallTool(ctx, "ask", nil, "", catalog.WithClient(cl))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestElicitResultDecode: accepted values decode into a struct.
func TestElicitResultDecode(t *testing.T) {
	var v struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	r := catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"name": "ada", "age": 36.0}}
	require.NoError(t, r.Decode(&v))
	assert.Equal(t, "ada", v.Name)
	assert.Equal(t, 36, v.Age)
	r.Content["age"] = "old"
	assert.Error(t, r.Decode(&v))
}
