package catalog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/livereg/livereg/catalog"
)

// A body detaches where its work goes on as a task: for a caller that
// takes tasks the call ends with the task, whose result is the rest's;
// for one that takes none the rest runs in the call; a task-only tool
// refuses a caller that takes none; and input gathered in rounds before
// the detach reaches the task.
func TestDetach(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran []string
	body := func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		name := "nobody"
		if string(call.Arguments) == `{"ask":true}` {
			r, err := call.Elicit(ctx, catalog.ElicitRequest{Key: "name", Message: "name?"})
			if err != nil {
				return catalog.Result{}, err
			}
			name, _ = r.Content["n"].(string)
		}
		return call.Detach(ctx, func(context.Context) (catalog.Result, error) {
			ran = append(ran, name)
			return catalog.TextResult("hello " + name), nil
		})
	}
	k, err := c.StartTool(bg, catalog.Tool{Name: "opt", TaskSupport: catalog.TaskOptional}, public, body)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop(bg)
	k2, err := c.StartTool(bg, catalog.Tool{Name: "req", TaskSupport: catalog.TaskRequired}, public, body)
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Stop(bg)

	res, err := c.CallTool(bg, "opt", nil, "alice", catalog.WithTasks())
	if err != nil || res.Task == nil || len(res.Content) != 0 {
		t.Fatalf("a caller that takes tasks: %+v %v", res, err)
	}
	if info := wait(t, res.Task); info.Status != catalog.TaskCompleted || info.Result.Content[0].Text != "hello nobody" {
		t.Fatalf("the detached task: %+v", info)
	}
	if _, err := c.GetTask(res.Task.ID(), "bob"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("another credential sees the task: %v", err)
	}
	res, err = c.CallTool(bg, "opt", nil, "alice")
	if err != nil || res.Task != nil || res.Content[0].Text != "hello nobody" {
		t.Fatalf("a caller that takes none: %+v %v", res, err)
	}
	if _, err := c.CallTool(bg, "req", nil, "alice"); !errors.Is(err, catalog.ErrTaskRequired) {
		t.Fatalf("a task-only tool, no tasks: %v", err)
	}
	// Rounds first, then the task.
	round := &catalog.Round{Elicitation: true}
	_, err = c.CallTool(bg, "req", []byte(`{"ask":true}`), "alice", catalog.WithTasks(), catalog.WithClient(&catalog.Client{Round: round}))
	var ir *catalog.InputRequiredError
	if !errors.As(err, &ir) {
		t.Fatalf("round 1: %v", err)
	}
	answers := map[string]catalog.InputResponse{"name": {Elicit: catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"n": "Ada"}}}}
	res, err = c.CallTool(bg, "req", []byte(`{"ask":true}`), "alice", catalog.WithTasks(),
		catalog.WithClient(&catalog.Client{Round: &catalog.Round{Instance: ir.Instance, Answers: answers, Elicitation: true}}))
	if err != nil || res.Task == nil {
		t.Fatalf("round 2: %+v %v", res, err)
	}
	if info := wait(t, res.Task); info.Result.Content[0].Text != "hello Ada" {
		t.Fatalf("the task after the rounds: %+v", info)
	}
	if len(ran) != 3 {
		t.Errorf("the rest ran %d times, want 3", len(ran))
	}
}
