package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

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
	if err != nil {
		t.Fatal(err)
	}
	if gotSample.Messages[0].Content.Text != "hi" {
		t.Errorf("gotSample.Messages[0].Content.Text = %q, want \"hi\"", gotSample.Messages[0].Content.Text)
	}
	if want := ([]string{"small"}); !reflect.DeepEqual(gotSample.Model.Hints, want) {
		t.Errorf("gotSample.Model.Hints = %v, want %v", gotSample.Model.Hints, want)
	}
	if sampled.Content.Text != "hello" {
		t.Errorf("sampled.Content.Text = %q, want \"hello\"", sampled.Content.Text)
	}
	if gotElicit.Message != "sure?" {
		t.Errorf("gotElicit.Message = %q, want \"sure?\"", gotElicit.Message)
	}
	if !jsonEqual(`{"type":"object","properties":{}}`, string(gotElicit.Schema)) {
		t.Errorf("JSON %s, want %s", string(gotElicit.Schema), `{"type":"object","properties":{}}`)
	}
	if elicited.Action != catalog.ElicitAccept {
		t.Errorf("elicited.Action = %q, want catalog.ElicitAccept", elicited.Action)
	}
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
			if !errors.Is(sampleErr, catalog.ErrNotSupported) {
				t.Errorf("err = %v, want catalog.ErrNotSupported", sampleErr)
			}
			if !errors.Is(elicitErr, catalog.ErrNotSupported) {
				t.Errorf("err = %v, want catalog.ErrNotSupported", elicitErr)
			}
			if !errors.Is(err, catalog.ErrNotSupported) {
				t.Errorf("the body's error reaches the caller: err = %v, want catalog.ErrNotSupported", err)
			}
			for _, c := range []struct {
				err  error
				want string
			}{{sampleErr, "sampling"}, {elicitErr, "elicitation"}} {
				var ce *catalog.CapabilityError
				if !errors.As(c.err, &ce) || ce.Capability != c.want || ce.Tool != "ask" {
					t.Errorf("err = %#v, want a CapabilityError for %s of ask", c.err, c.want)
				}
			}
			if got := sampleErr.Error(); !strings.Contains(got, "sampling") {
				t.Errorf("sampleErr.Error() = %q, want it to contain %q", got, "sampling")
			}
			if got := elicitErr.Error(); !strings.Contains(got, "elicitation") {
				t.Errorf("elicitErr.Error() = %q, want it to contain %q", got, "elicitation")
			}
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
			if !errors.Is(err, catalog.ErrInvalidRequest) {
				t.Errorf("err = %v, want catalog.ErrInvalidRequest", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
			if sent != 0 {
				t.Errorf("a malformed request was sent: sent = %v, want 0", sent)
			}
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
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

// TestElicitResultDecode: accepted values decode into a struct.
func TestElicitResultDecode(t *testing.T) {
	var v struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	r := catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"name": "ada", "age": 36.0}}
	if err := r.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Name != "ada" {
		t.Errorf("v.Name = %q, want \"ada\"", v.Name)
	}
	if v.Age != 36 {
		t.Errorf("v.Age = %v, want 36", v.Age)
	}
	r.Content["age"] = "old"
	if err := r.Decode(&v); err == nil {
		t.Errorf("r.Decode(&v) returned no error")
	}
}
