package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
func ExampleTypedTool() {
	cat, _ := catalog.New(catalog.Config{})
	ctx := context.Background()
	tool, body, err := catalog.TypedTool(catalog.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, c catalog.Call, in greetIn) (greetOut, error) {
			return greetOut{Greeting: "hello, " + in.Name}, nil
		})
	if err != nil {
		fmt.Println(err)
		return
	}
	k, _ := cat.StartTool(ctx, tool, bindsec.Plan{Public: true}, body)
	defer k.Stop(ctx)
	fmt.Println("input schema:", string(tool.InputSchema))

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
			_ = c.Log(ctx, catalog.LevelInfo, "counted")
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
	// info counted
	// done
}
