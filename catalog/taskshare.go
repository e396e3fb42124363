package catalog

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/livereg/livereg/internal/quote"
)

// Who a task counts against, and how long its body may run.
//
// A task is seen with the credential that started it (task.go), but the
// store's per-caller cap (Config.MaxTasksPerCaller) counts it against its
// share: by default the credential itself, which is right for a caller
// that the catalog trusts to be one client; a front that serves
// strangers names the share itself (WithTaskShare), the principal the
// credential authenticated as, or the client's address when it did not,
// so that made-up credentials do not each open a new share. Anonymous
// shares together hold at most Config.MaxAnonymousTasks.
//
// A task's body runs for at most Config.MaxTaskLifetime: at the bound the
// task ends failed with ErrTaskLifetime and its body's context is
// cancelled with that cause. It costs one runtime timer per working task,
// stopped when the task ends.

// TaskShare names the share of the task caps that a task started by a
// call counts against (WithTaskShare).
type TaskShare struct {
	// Key is the client: two calls with the same Key share one
	// Config.MaxTasksPerCaller. Empty means the call's credential.
	Key string
	// Anonymous says the client did not authenticate: its tasks count
	// against Config.MaxAnonymousTasks too, with every other anonymous
	// client's.
	Anonymous bool
}

// WithTaskShare says which share of the task caps a task that the call
// starts (StartTask, or a body's Detach) counts against; without it, the
// credential's own.
func WithTaskShare(sh TaskShare) CallOption { return CallOption{share: sh} }

// ErrTaskLifetime: a task's body ran for Config.MaxTaskLifetime; the task
// ended failed with it, and its body's context was cancelled with it as
// the cause.
var ErrTaskLifetime = errors.New("catalog: task lifetime reached")

// Defaults of the task bounds this file adds.
const (
	defaultTaskLifetime = time.Hour
	// defaultAnonymousTasks is the fraction of Config.MaxTasks the
	// anonymous shares hold together: half, as for the front's caps.
	defaultAnonymousTasks = 0.5
)

// shareKey is what the store counts t against: the credential's hash,
// or the share's key (tagged apart, so that no credential can collide
// with a share).
func shareKey(credential string, sh TaskShare) [32]byte {
	if sh.Key == "" {
		return sha256.Sum256([]byte("credential\x00" + credential))
	}
	return sha256.Sum256([]byte("share\x00" + sh.Key))
}

// taskShareOf returns the share opts name, if any.
func taskShareOf(opts []CallOption) TaskShare {
	for _, o := range opts {
		if o.share != (TaskShare{}) {
			return o.share
		}
	}
	return TaskShare{}
}

// newTask is a task of tool, started with credential, counted against sh.
func newTask(tool, credential string, sh TaskShare, rt *route) *task {
	return &task{id: newTaskID(), tool: tool, caller: callerKey(credential), share: shareKey(credential, sh), anon: sh.Anonymous,
		ref: rt.ref, done: make(chan struct{}), status: TaskWorking}
}

// taskContext is the context of a task's body: ctx's values, not its
// end, and a cancel that ends it.
func taskContext(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(context.WithoutCancel(ctx))
}

// bound sets t's cancel, once its body is admitted: cancel, and, with a
// lifetime, the timer that ends t at it. Nothing else sees t.cancel yet:
// t's ID has not been returned and t is not among its route's tasks.
func (s *taskStore) bound(t *task, cancel context.CancelCauseFunc) {
	if s.lifetime <= 0 {
		t.cancel = func() { cancel(context.Canceled) }
		return
	}
	life := s.lifetime
	tm := time.AfterFunc(life, func() {
		err := fmt.Errorf("catalog: task %s of tool %s: %w: it ran for %v (Config.MaxTaskLifetime)", t.id, quote.Name(t.tool), ErrTaskLifetime, life)
		if s.end(t, TaskFailed, Result{}, err) {
			cancel(err)
		}
	})
	t.cancel = func() {
		tm.Stop()
		cancel(context.Canceled)
	}
}

// overShare reports why t may not be added, if its share is full; s.mu
// is held.
func (s *taskStore) overShare(t *task) error {
	switch {
	case s.perCaller[t.share] >= s.perMax:
		return fmt.Errorf("catalog: %w: %d tasks held for this caller, the most one keeps", ErrTooManyTasks, s.perCaller[t.share])
	case t.anon && s.anonMax > 0 && s.anonHeld >= s.anonMax:
		return fmt.Errorf("catalog: %w: %d tasks held for anonymous callers, the most they keep together", ErrTooManyTasks, s.anonHeld)
	}
	return nil
}
