package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livereg/livereg/catalog"
)

// The fixtures of the tasks scenarios (SEP-2663). Names, arguments and
// answers are the suite's. Each task-supporting body detaches
// (catalog.Call.Detach) where its work goes on as a task; a caller that
// takes no tasks gets the same work in the call.

type greetIn struct {
	Name string `json:"name"`
}

type computeIn struct {
	Seconds float64 `json:"seconds"`
	Label   string  `json:"label"`
}

// maxComputeSeconds bounds slow_compute's seconds.
const maxComputeSeconds = 60

// pauseFor waits d, or until ctx ends (a cancelled task's body).
func pauseFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tasks adds them.
func (s *set) tasks() {
	s.tool(catalog.Tool{Name: "greet", Description: "Greets by name; never a task.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			var in greetIn
			if len(c.Arguments) > 0 {
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return catalog.Result{}, err
				}
			}
			return catalog.TextResult("Hello, " + in.Name + "!"), nil
		})
	// Its seconds are bounded by its schema, which the catalog checks
	// before the body runs: a client cannot hold a task, and its share
	// of the task caps, for longer than maxComputeSeconds.
	s.tool(catalog.Tool{Name: "slow_compute", Description: "Sleeps the seconds asked (at most 60), then answers; runs as a task.", TaskSupport: catalog.TaskOptional,
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":%d},"label":{"type":"string"}}}`, maxComputeSeconds))},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			var in computeIn
			if len(c.Arguments) > 0 {
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return catalog.Result{}, err
				}
			}
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				if err := pauseFor(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
					return catalog.Result{}, err
				}
				return catalog.TextResult(fmt.Sprintf("computed %q after %gs", in.Label, in.Seconds)), nil
			})
		})
	s.tool(catalog.Tool{Name: "failing_job", Description: "Fails with a tool error after a second; runs as a task only.", TaskSupport: catalog.TaskRequired},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				if err := pauseFor(ctx, time.Second); err != nil {
					return catalog.Result{}, err
				}
				return catalog.Result{}, errors.New("failing_job failed, as it always does")
			})
		})
	// A body that panics kills its consumer, as every panic does; a
	// supervisor starts it again, as a host restarts a crashed plugin.
	s.supervised(catalog.Tool{Name: "protocol_error_job", Description: "Panics: its task fails with a protocol error.", TaskSupport: catalog.TaskOptional},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(context.Context) (catalog.Result, error) {
				panic("protocol_error_job: a deliberate internal failure")
			})
		})
	s.tool(catalog.Tool{Name: "confirm_delete", Description: "Asks to confirm, then deletes (nothing); runs as a task.", TaskSupport: catalog.TaskOptional,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"filename":{"type":"string"}}}`)},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				r, err := c.Elicit(ctx, catalog.ElicitRequest{Key: "confirm", Message: "Delete the file?",
					Schema: json.RawMessage(`{"type":"object","properties":{"confirm":{"type":"boolean"}}}`)})
				if err != nil {
					return catalog.Result{}, err
				}
				return catalog.TextResult("delete: " + value(r, "confirm")), nil
			})
		})
	s.tool(catalog.Tool{Name: "multi_input", Description: "Asks two questions at once; runs as a task.", TaskSupport: catalog.TaskOptional},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				form := json.RawMessage(`{"type":"object","properties":{}}`)
				a, err := catalog.Ask(ctx,
					catalog.InputRequest{Key: "first", Elicit: &catalog.ElicitRequest{Message: "First?", Schema: form}},
					catalog.InputRequest{Key: "second", Elicit: &catalog.ElicitRequest{Message: "Second?", Schema: form}})
				if err != nil {
					return catalog.Result{}, err
				}
				return catalog.TextResult(fmt.Sprintf("answers: %s, %s", a[0].Elicit.Action, a[1].Elicit.Action)), nil
			})
		})
	// Gathers its input synchronously, in rounds, then goes on as a
	// task: the questions before Detach are the call's, the work after
	// it the task's.
	s.tool(catalog.Tool{Name: "test_tool_with_task", Description: "Asks the user's name, then greets them from a task.", TaskSupport: catalog.TaskRequired},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Elicit(ctx, form("user_name", "What is your name?", "name", "string"))
			if err != nil {
				return catalog.Result{}, err
			}
			name := value(r, "name")
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				if err := pauseFor(ctx, 100*time.Millisecond); err != nil {
					return catalog.Result{}, err
				}
				return catalog.TextResult("Hello, " + name + ", from a task!"), nil
			})
		})
}

// supervised adds a tool whose consumer is started again whenever it
// dies, until the server's context ends.
func (s *set) supervised(t catalog.Tool, h catalog.ToolHandler) {
	s.routes = append(s.routes, Route{catalog.KindTool, t.Name, func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
		k, err := cat.StartTool(ctx, t, public, h)
		if err != nil {
			return nil, err
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-k.Done():
				}
				// The name frees at once after a death; a start that
				// meets it still held waits a moment and tries again.
				for {
					var err error
					if k, err = cat.StartTool(ctx, t, public, h); err == nil || ctx.Err() != nil {
						break
					}
					_ = pauseFor(ctx, 10*time.Millisecond)
				}
				if k == nil {
					return
				}
			}
		}()
		return k, nil
	}})
}
