package catalog_test

import (
	"context"
	"fmt"
	"log"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// A task runs a tool's body apart from its caller, who comes back for the
// result; it lives no longer than the consumer whose route started it.
func ExampleCatalog_StartTask() {
	ctx := context.Background()
	cat, err := catalog.New(catalog.Config{})
	if err != nil {
		log.Fatal(err)
	}
	k, err := cat.StartTool(ctx, catalog.Tool{Name: "report", TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("the quarterly report"), nil
		})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Stop(ctx)

	task, err := cat.StartTask(ctx, "report", nil, "alice-token")
	if err != nil {
		log.Fatal(err)
	}
	info, err := task.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Status, info.Result.Content[0].Text)
	// Another credential does not see it.
	_, err = cat.GetTask(task.ID(), "bob-token")
	fmt.Println(err != nil)
	// Output:
	// completed the quarterly report
	// true
}
