package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/livereg/livereg/internal/quote"
)

// A body decides when its work goes on as a task: Call.Detach. Until
// then it runs as any call, on its caller's goroutine, and may ask its
// caller in rounds (MCP 2026-07-28's input-required results gather input
// synchronously); from then on the rest runs as a task of the same
// consumer, under the rules of catalog/task.go, and the call ends with
// it. A caller that takes no tasks gets the rest run in the call.

// detach is what a call that takes tasks tells its body's Detach.
type detach struct {
	rest  func(ctx context.Context) (Result, error)
	share TaskShare // WithTaskShare's
}

type detachKey struct{}

// errDetached is what Detach returns for the body to return.
var errDetached = errors.New("catalog: the body detached into a task")

// Detach ends the call with a task that runs rest, on a goroutine of its
// own, for a caller that takes tasks (WithTasks, or MCP's tasks extension),
// and returns what the body must return (errors.Is ErrDetached... it is
// an internal value the catalog recognises: return it as it is). For a
// caller that takes none it runs rest on the caller's goroutine and
// returns what rest returns: the body's code is the same either way.
//
// rest runs under the task's rules: its consumer's death fails the task
// at once, CancelTask ends its context, and its questions (Ask) go
// through the task (UpdateTask) when the caller answers in rounds. It
// must not use the body's ctx, which ends with the call; it gets its own.
// A tool whose TaskSupport is TaskForbidden runs rest in the call.
func (c Call) Detach(ctx context.Context, rest func(ctx context.Context) (Result, error)) (Result, error) {
	d, _ := ctx.Value(detachKey{}).(*detach)
	if d == nil || d.rest != nil {
		return rest(ctx)
	}
	d.rest = rest
	return Result{}, errDetached
}

// detached starts the task a body detached into, once the body returned:
// the task is the caller's (credential), admitted through rt's gate
// again, and runs on a goroutine of its own.
func (c *Catalog) detached(ctx context.Context, rt *route, d *detach, credential string, cl *Client) (Result, error) {
	if rt.tool.TaskSupport == TaskForbidden {
		return d.rest(ctx)
	}
	s := c.tasks
	t := newTask(rt.name, credential, d.share, rt)
	if err := s.add(t); err != nil {
		return Result{}, err
	}
	bctx, cancel := taskContext(ctx)
	if cl != nil {
		bctx = context.WithValue(bctx, clientKey{}, s.taskClient(t, cl))
	}
	st, err := rt.admit(bctx)
	if err != nil {
		cancel(nil)
		s.remove(t)
		return Result{}, fmt.Errorf("catalog: tool %s: %w", quote.Name(rt.name), err)
	}
	s.bound(t, cancel)
	rt.addTask(t)
	go c.runTask(bctx, rt, st, t, d.rest)
	return Result{Task: &Task{t: t, s: s}}, nil
}

// takesTasks reports whether opts say the caller takes tasks.
func takesTasks(opts []CallOption) bool {
	for _, o := range opts {
		if o.tasks {
			return true
		}
	}
	return false
}
