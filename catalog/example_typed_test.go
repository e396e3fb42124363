package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

// A typed tool: its schemas are inferred from Go types, its arguments are
// checked before the body runs, and its output is structured content.
func ExampleStartTypedTool() {
	cat, _ := catalog.New(catalog.Config{})
	ctx := context.Background()
	k, err := catalog.StartTypedTool(ctx, cat, catalog.Tool{Name: "greet", Description: "Greets someone."}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call, in greetIn) (greetOut, error) {
			return greetOut{Greeting: "hello, " + in.Name}, nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Stop(ctx)
	fmt.Println("input schema:", string(cat.Tools().List()[0].InputSchema))

	res, _ := cat.CallTool(ctx, "greet", json.RawMessage(`{"name":"ada"}`), "")
	fmt.Println("structured:", string(res.StructuredContent.(json.RawMessage)))

	_, err = cat.CallTool(ctx, "greet", json.RawMessage(`{"name":42}`), "")
	fmt.Println("bad arguments:", errors.Is(err, catalog.ErrInvalidArguments))
	// Output:
	// input schema: {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}
	// structured: {"greeting":"hello, ada"}
	// bad arguments: true
}

// A body reports progress and logs to its caller. An in-process caller
// receives them through WithClient; package mcpserve sends them to MCP
// clients as notifications.
func ExampleCall_ReportProgress() {
	cat, _ := catalog.New(catalog.Config{})
	ctx := context.Background()
	k, _ := cat.StartTool(ctx, catalog.Tool{Name: "count"}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			for i := 1; i <= 3; i++ {
				_ = c.ReportProgress(ctx, catalog.Progress{Progress: float64(i), Total: 3})
			}
			_ = c.Log(ctx, slog.LevelInfo, "counted")
			return catalog.TextResult("done"), nil
		})
	defer k.Stop(ctx)

	cl := &catalog.Client{
		Progress: func(_ context.Context, p catalog.Progress) error {
			fmt.Printf("progress %v/%v\n", p.Progress, p.Total)
			return nil
		},
		Log: func(_ context.Context, m catalog.LogMessage) error {
			fmt.Println(m.Level, m.Data)
			return nil
		},
	}
	res, _ := cat.CallTool(ctx, "count", nil, "", catalog.WithClient(cl))
	fmt.Println(res.Content[0].Text)
	// Output:
	// progress 1/3
	// progress 2/3
	// progress 3/3
	// INFO counted
	// done
}

// A body asks its caller's user to fill in a form, and its caller's LLM
// for a completion. A caller that offers neither (here: the second call,
// without a Client) gives the body ErrNotSupported; package mcpserve
// offers them to MCP clients that declared the capabilities.
func ExampleCall_Elicit() {
	cat, _ := catalog.New(catalog.Config{})
	ctx := context.Background()
	k, _ := cat.StartTool(ctx, catalog.Tool{Name: "greet-me"}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			form, err := c.Elicit(ctx, catalog.ElicitRequest{
				Message: "What is your name?",
				Schema:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","default":"you"}}}`),
			})
			if err != nil {
				return catalog.Result{}, err
			}
			if form.Action != catalog.ElicitAccept {
				return catalog.TextResult("maybe later"), nil
			}
			var who struct {
				Name string `json:"name"`
			}
			if err := form.Decode(&who); err != nil {
				return catalog.Result{}, err
			}
			poem, err := c.Sample(ctx, catalog.SampleRequest{
				Messages:  []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: "text", Text: "A greeting for " + who.Name}}},
				MaxTokens: 50,
			})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(poem.Content.Text), nil
		})
	defer k.Stop(ctx)

	cl := &catalog.Client{
		Elicit: func(_ context.Context, r catalog.ElicitRequest) (catalog.ElicitResult, error) {
			return catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"name": "ada"}}, nil
		},
		Sample: func(_ context.Context, r catalog.SampleRequest) (catalog.SampleResult, error) {
			text := r.Messages[0].Content.Text + ": hello, friend"
			return catalog.SampleResult{Role: catalog.RoleAssistant, Content: catalog.Content{Type: "text", Text: text}}, nil
		},
	}
	res, _ := cat.CallTool(ctx, "greet-me", nil, "", catalog.WithClient(cl))
	fmt.Println(res.Content[0].Text)

	_, err := cat.CallTool(ctx, "greet-me", nil, "")
	fmt.Println(errors.Is(err, catalog.ErrNotSupported))
	// Output:
	// A greeting for ada: hello, friend
	// true
}
