package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// A consumer starts a tool, serves a call, and is killed by cancelling its
// context; a restart takes the name over at once.
func Example() {
	cat, _ := catalog.New(catalog.Config{})
	ctx := context.Background()
	public := bindsec.Plan{Public: true}

	abortA, cancel := context.WithCancel(ctx)
	a, _ := cat.StartTool(abortA, catalog.Tool{Name: "greet"}, public,
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("hello from A"), nil
		})
	res, _ := cat.CallTool(ctx, "greet", nil, "")
	fmt.Println(res.Content[0].Text)

	// A live consumer holds its name.
	_, err := cat.StartTool(ctx, catalog.Tool{Name: "greet"}, public,
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, nil })
	fmt.Println("duplicate:", errors.Is(err, catalog.ErrDuplicate))

	cancel() // A's task is aborted: no Stop is ever called
	<-a.Done()

	b, err := cat.StartTool(ctx, catalog.Tool{Name: "greet"}, public,
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("hello from B"), nil
		})
	fmt.Println("takeover:", err == nil)
	res, _ = cat.CallTool(ctx, "greet", nil, "")
	fmt.Println(res.Content[0].Text)

	_ = a.Stop(ctx) // A's late stop leaves B's route alone
	fmt.Println("tools:", len(cat.Tools().List()))
	_ = b.Stop(ctx)
	fmt.Println("tools after B stops:", len(cat.Tools().List()))
	runtime.KeepAlive(a)
	// Output:
	// hello from A
	// duplicate: true
	// takeover: true
	// hello from B
	// tools: 1
	// tools after B stops: 0
}
