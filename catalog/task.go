package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// A task is a tool call whose body runs on a goroutine of its own, so that
// its caller can go and come back for the result (MCP's tasks extension).
// It belongs to the consumer whose route started it, as a call does: the
// body is admitted through the route's gate, Stop waits for it as for any
// body, and when the consumer dies, by any of the four paths, the task
// reads failed at once, with ErrRouteGone and the death's cause, whatever
// its body does afterwards; nothing a successor of the same name does ever
// reaches it. A task is seen only with the credential that started it:
// with another it is not found, exactly like an unknown ID. A watcher
// hears its every change, its death included, without polling
// (WatchTask, taskwatch.go).
//
// The store of tasks is bounded: Config.MaxTasks in all,
// Config.MaxTasksPerCaller for one share (the credential's, or the
// client's that the call names, taskshare.go) and Config.MaxAnonymousTasks
// for the anonymous shares together (the retained results of ended tasks
// count until they expire), and Config.MaxTaskResultBytes of results kept.
// A body runs for at most Config.MaxTaskLifetime. An ended task is kept for Config.TaskTTL, then gone. The
// catalog runs no timer for it: expired tasks are dropped by the next
// operation on the store, and a dead consumer's tasks end from its death's
// after-death function.

// TaskSupport says whether a tool's calls may run as tasks.
type TaskSupport uint8

// The kinds of task support. The zero value forbids tasks.
const (
	TaskForbidden TaskSupport = iota // calls run on the caller's goroutine only
	TaskOptional                     // a caller may start a task, or call
	TaskRequired                     // a caller must start a task
)

// TaskStatus is where a task stands.
type TaskStatus string

// The statuses of a task. Every one but TaskWorking is terminal.
const (
	TaskWorking TaskStatus = "working"
	// TaskInputRequired: the body asked its caller and waits for
	// UpdateTask (taskinput.go); Requests are the open questions.
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed" // the body returned: Result and Err are CallTool's
	TaskFailed        TaskStatus = "failed"    // the body panicked or called runtime.Goexit, or its consumer died first: Err says which
	TaskCancelled     TaskStatus = "cancelled" // CancelTask ended it
)

// TaskInfo is a task as it reads at one instant.
type TaskInfo struct {
	ID     string
	Tool   string
	Status TaskStatus
	// Result and Err, once the task ended: for TaskCompleted what
	// CallTool would have returned (a body's own error is Err); for
	// TaskFailed the reason (ErrRouteGone wrapping the consumer's death,
	// ErrRoutePanicked, ErrRouteExited, ErrTooManyTasks for a result over
	// the budget).
	Result Result
	Err    error
	// Requests are the questions its body waits for answers to, while
	// it reads TaskInputRequired.
	Requests []InputRequest
	// Created and Updated are when it began and last changed; Expires,
	// once it ended, when it will be gone (Config.TaskTTL later).
	Created, Updated, Expires time.Time
}

// Terminal reports whether the task has ended.
func (i TaskInfo) Terminal() bool { return i.Status != TaskWorking && i.Status != TaskInputRequired }

// Task is a handle on a task that StartTask started. Its methods are safe
// for concurrent use.
type Task struct {
	t *task
	s *taskStore
}

// ID returns the task's ID: 128 random bits, base64url, unguessable.
func (t *Task) ID() string { return t.t.id }

// Info returns the task as it reads now. It costs two locks.
func (t *Task) Info() TaskInfo { return t.s.read(t.t) }

// Wait waits until the task ends, or ctx does, and returns it as it reads
// then: terminal unless ctx ended first, with ctx's error.
func (t *Task) Wait(ctx context.Context) (TaskInfo, error) {
	select {
	case <-t.t.done:
	case <-t.t.ref.Done():
	case <-ctx.Done():
		return t.Info(), ctx.Err()
	}
	return t.Info(), nil
}

// task is one task in the store.
type task struct {
	id, tool string
	caller   [32]byte // SHA-256 of the credential that started it
	share    [32]byte // the share it counts against (taskshare.go)
	anon     bool     // its share is anonymous
	ref      owner.Ref
	cancel   context.CancelFunc
	done     chan struct{} // closed when it ends

	mu      sync.Mutex
	status  TaskStatus
	res     Result
	err     error
	created time.Time
	updated time.Time
	expires time.Time
	size    int64 // bytes of its result counted against the budget
	// What its body asked (taskinput.go): the open questions, the
	// answers so far, and a channel closed at the next answer.
	asked   []InputRequest
	answers map[string]InputResponse
	wake    chan struct{}
	// changed is closed at the task's next change, for its watchers
	// (taskwatch.go); nil while nobody watches.
	changed chan struct{}
}

// info reads t.
func (t *task) info() TaskInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.infoLocked()
}

// infoLocked reads t; t.mu is held.
func (t *task) infoLocked() TaskInfo {
	info := TaskInfo{ID: t.id, Tool: t.tool, Status: t.status, Result: t.res, Err: t.err,
		Created: t.created, Updated: t.updated, Expires: t.expires}
	if t.status == TaskInputRequired {
		info.Requests = slices.Clone(t.asked)
	}
	return info
}

// StartTask starts a call of the tool name as a task, presenting
// credential as CallTool does, and returns it once its body is admitted:
// the same refusals as CallTool (ErrNotFound, ErrInvalidArguments,
// ErrRouteGone, ErrOverloaded, a denial) come back here, before anything
// runs, and so does ErrTooManyTasks at the store's caps, and
// ErrInvalidRequest for a tool whose TaskSupport is TaskForbidden. The
// body then runs on a goroutine of its own, with a context that ctx's
// values reach but not its end: CancelTask ends it. Options: WithClient:
// its reports reach the caller, and a Round in it says the caller answers
// the body's questions through the task (UpdateTask) and what it can
// answer.
//
// It costs what a call costs, plus the goroutine and the task's record.
func (c *Catalog) StartTask(ctx context.Context, name string, args json.RawMessage, credential string, opts ...CallOption) (*Task, error) {
	var pr bindsec.Principal
	rt, err := c.resolve(ctx, &c.tools, name, credential, &pr)
	if err != nil {
		return nil, c.refused(ctx, err)
	}
	if rt.tool.TaskSupport == TaskForbidden {
		return nil, c.refused(ctx, fmt.Errorf("catalog: tool %s: %w: it does not run as a task", quote.Name(name), ErrInvalidRequest))
	}
	if len(args) != 0 || rt.schemas.in != nil {
		if err := rt.checkArgs(args); err != nil {
			return nil, c.refused(ctx, err)
		}
	}
	s := c.tasks
	t := newTask(name, credential, taskShareOf(opts), rt)
	if err := s.add(t); err != nil {
		return nil, c.refused(ctx, err)
	}
	bctx, cancel := taskContext(ctx)
	for _, o := range opts {
		if o.client != nil {
			bctx = context.WithValue(bctx, clientKey{}, s.taskClient(t, o.client))
		}
	}
	st, err := rt.admit(bctx)
	if err != nil {
		cancel(nil)
		s.remove(t)
		return nil, c.refused(ctx, err)
	}
	s.bound(t, cancel)
	rt.addTask(t)
	call := Call{Name: name, Arguments: args, Principal: pr, Owner: rt.ref}
	go c.runTask(bctx, rt, st, t, func(ctx context.Context) (Result, error) { return rt.callTool(ctx, call) })
	return &Task{t: t, s: s}, nil
}

// runTask runs a task's admitted body and records how it ended.
func (c *Catalog) runTask(ctx context.Context, rt *route, st *stripe, t *task, body func(context.Context) (Result, error)) {
	var res Result
	var err error
	var returned bool // bodyReturned: see route.finish
	defer c.finishTask(ctx, rt, st, t, &res, &err, &returned)
	res, err = body(ctx)
	returned = true
	if err == nil && rt.schemas.out != nil {
		if err = rt.checkResult(&res); err != nil {
			res = Result{}
		}
	}
}

// finishTask is route.finish for a task's body, deferred directly in
// runTask, so that the task ends however the body left: a body that
// panicked or ended the goroutine with runtime.Goexit fails its task
// with its own error (ErrRoutePanicked, ErrRouteExited), recorded before
// the consumer is killed, whose death would fail it with ErrRouteGone;
// one that returned completes it once its slot is free, so that a caller
// who saw it end finds the slot free.
func (c *Catalog) finishTask(ctx context.Context, rt *route, st *stripe, t *task, res *Result, err *error, returned *bool) {
	unwound := rt.unwound(recover(), *returned, err)
	if unwound {
		c.tasks.end(t, TaskFailed, Result{}, *err)
		rt.release()
	}
	rt.exit(ctx, st, *err)
	if !unwound {
		c.tasks.end(t, TaskCompleted, *res, *err)
	}
	t.cancel()
	rt.removeTask(t)
}

// routeTasks are a route's tasks still working: its consumer's death
// ends them (endTasks), with one after-death function for the route
// rather than one per task, which a long-lived consumer would pile up.
type routeTasks struct {
	mu   sync.Mutex
	set  map[*task]struct{}
	dead bool
}

// addTask puts t among rt's working tasks; when rt's death has already
// ended them, it ends t now.
func (rt *route) addTask(t *task) {
	rt.tasks.mu.Lock()
	if !rt.tasks.dead {
		if rt.tasks.set == nil {
			rt.tasks.set = map[*task]struct{}{}
		}
		rt.tasks.set[t] = struct{}{}
		rt.tasks.mu.Unlock()
		return
	}
	rt.tasks.mu.Unlock()
	rt.cat.tasks.end(t, TaskFailed, Result{}, deathError(rt.name, rt.ref))
	t.cancel()
}

func (rt *route) removeTask(t *task) {
	rt.tasks.mu.Lock()
	delete(rt.tasks.set, t)
	rt.tasks.mu.Unlock()
}

// endTasks ends the working tasks of rt, whose owner is dead: failed
// with ErrRouteGone. Readers saw them failed already (taskStore.read);
// this makes them terminal in the store, so that their records expire
// and stop counting against the caps.
func (rt *route) endTasks() {
	rt.tasks.mu.Lock()
	set := rt.tasks.set
	rt.tasks.set, rt.tasks.dead = nil, true
	rt.tasks.mu.Unlock()
	for t := range set {
		if rt.cat.tasks.end(t, TaskFailed, Result{}, deathError(rt.name, rt.ref)) {
			t.cancel()
		}
	}
}

// deathError is a task's reason when the consumer of its tool died under
// it.
func deathError(tool string, ref owner.Ref) error {
	return fmt.Errorf("catalog: tool %s: its consumer died (%s): %w", quote.Name(tool), ref.Cause(), ErrRouteGone)
}

// TaskTTL returns how long an ended task is kept (Config.TaskTTL).
func (c *Catalog) TaskTTL() time.Duration { return c.tasks.ttl }

// GetTask returns the task id as it reads now, as credential may see it:
// ErrNotFound for an unknown or expired ID, and for a task that another
// credential started. It is safe for concurrent use and costs two locks
// and a hash of the credential.
func (c *Catalog) GetTask(id, credential string) (TaskInfo, error) {
	t, err := c.tasks.find(id, credential)
	if err != nil {
		return TaskInfo{}, err
	}
	return c.tasks.read(t), nil
}

// CancelTask cancels the task id, as credential may see it: a working
// task reads cancelled from then on, and its body's context ends; an
// ended one is left as it is. Errors: ErrNotFound, as for GetTask.
func (c *Catalog) CancelTask(id, credential string) error {
	t, err := c.tasks.find(id, credential)
	if err != nil {
		return err
	}
	if c.tasks.end(t, TaskCancelled, Result{}, context.Canceled) {
		t.cancel()
	}
	return nil
}
