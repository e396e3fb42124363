package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// watchGuard bounds a wait for a change that should come at once.
const watchGuard = 5 * time.Second

// changed waits for ch to close, and fails the test if it does not.
func changed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(watchGuard):
		t.Fatalf("no change signalled: %s", what)
	}
}

// unchanged fails the test if ch is closed.
func unchanged(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("a change signalled: %s", what)
	default:
	}
}

// watch is WatchTask as alice, failing the test on an error.
func watch(t *testing.T, c *catalog.Catalog, id string) (catalog.TaskInfo, <-chan struct{}) {
	t.Helper()
	info, ch, err := c.WatchTask(id, "alice")
	if err != nil {
		t.Fatal(err)
	}
	return info, ch
}

// A watcher hears each change of a task as it comes, with nobody
// polling: working to input_required, a partial answer, working again,
// the end; an ended task has nothing more to say (a nil channel); another
// credential's task is not found, as with GetTask.
func TestWatchTask(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	k, err := c.StartTool(bg, taskTool, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		if _, err := catalog.Ask(ctx,
			catalog.InputRequest{Key: "a", ListRoots: true},
			catalog.InputRequest{Key: "b", ListRoots: true}); err != nil {
			return catalog.Result{}, err
		}
		<-release
		return catalog.TextResult("done"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		_ = k.Stop(ctx)
	}()
	tk, err := c.StartTask(bg, "job", nil, "alice", catalog.WithClient(&catalog.Client{Round: &catalog.Round{Roots: true}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WatchTask(tk.ID(), "bob"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("bob watches alice's task: %v, want ErrNotFound", err)
	}
	if _, _, err := c.WatchTask("no-such-task", "alice"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("an unknown id: %v, want ErrNotFound", err)
	}
	info, ch := watch(t, c, tk.ID())
	if info.Status == catalog.TaskWorking {
		changed(t, ch, "working to input_required")
		info, ch = watch(t, c, tk.ID())
	}
	if info.Status != catalog.TaskInputRequired || len(info.Requests) != 2 {
		t.Fatalf("after the body asked: %+v", info)
	}
	roots := catalog.InputResponse{Roots: []catalog.Root{{URI: "file:///w"}}}
	if err := c.UpdateTask(tk.ID(), "alice", map[string]catalog.InputResponse{"other": roots}); err != nil {
		t.Fatal(err)
	}
	unchanged(t, ch, "an answer to no open question")
	if err := c.UpdateTask(tk.ID(), "alice", map[string]catalog.InputResponse{"a": roots}); err != nil {
		t.Fatal(err)
	}
	changed(t, ch, "a partial answer")
	if info, ch = watch(t, c, tk.ID()); info.Status != catalog.TaskInputRequired || len(info.Requests) != 1 {
		t.Fatalf("after a partial answer: %+v", info)
	}
	if err := c.UpdateTask(tk.ID(), "alice", map[string]catalog.InputResponse{"b": roots}); err != nil {
		t.Fatal(err)
	}
	changed(t, ch, "input_required to working")
	if info, ch = watch(t, c, tk.ID()); info.Status != catalog.TaskWorking {
		t.Fatalf("after the last answer: %+v", info)
	}
	close(release)
	changed(t, ch, "working to completed")
	info, ch = watch(t, c, tk.ID())
	if info.Status != catalog.TaskCompleted || ch != nil {
		t.Fatalf("once ended: %+v, channel %v, want completed and nil", info, ch)
	}
}

// A watcher hears a task fail at its consumer's death, without reading
// it: a task that waits for input as well as one that works. And a body
// that returns after the death, before the after-death function ran,
// cannot make its task read completed: the death was its end.
func TestWatchTaskHearsDeath(t *testing.T) {
	for _, asking := range []bool{false, true} {
		name := "working"
		if asking {
			name = "input_required"
		}
		t.Run(name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			b := newBlocker()
			k, err := c.StartTool(ctx, taskTool, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
				if asking {
					_, err := catalog.Ask(ctx, catalog.InputRequest{Key: "a", ListRoots: true})
					return catalog.Result{}, err
				}
				return b.body(ctx, call)
			})
			if err != nil {
				t.Fatal(err)
			}
			tk, err := c.StartTask(bg, "job", nil, "alice", catalog.WithClient(&catalog.Client{Round: &catalog.Round{Roots: true}}))
			if err != nil {
				t.Fatal(err)
			}
			want := catalog.TaskWorking
			if asking {
				want = catalog.TaskInputRequired
			} else {
				<-b.started
			}
			info, ch := watch(t, c, tk.ID())
			for info.Status != want {
				changed(t, ch, "the task to ask")
				info, ch = watch(t, c, tk.ID())
			}
			cancel() // the consumer dies by its context
			changed(t, ch, "the consumer's death")
			<-k.Done()
			if info, ch := watch(t, c, tk.ID()); info.Status != catalog.TaskFailed || !errors.Is(info.Err, catalog.ErrRouteGone) || ch != nil {
				t.Fatalf("after the death: %+v %v, want failed with ErrRouteGone", info, ch)
			}
			b.let()
		})
	}
	t.Run("the fleet release waits", func(t *testing.T) {
		// The consumer's fleet claim is released after its death, and a
		// release may wait on the network: the tasks end first.
		hold := make(chan struct{})
		defer close(hold)
		c := newCatalog(t, catalog.Config{Claimer: slowRelease(hold)})
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		b := newBlocker()
		if _, err := c.StartTool(ctx, taskTool, public, b.body); err != nil {
			t.Fatal(err)
		}
		tk := startTask(t, c, "alice")
		_, ch := watch(t, c, tk.ID())
		cancel()
		changed(t, ch, "the consumer's death, while its claim's release waits")
		b.let()
	})
	t.Run("returns before the after-death function", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{})
		retiring := make(chan struct{})
		hold := make(chan struct{})
		c.SetBeforeRetireHook(func(string) { close(retiring); <-hold })
		defer close(hold)
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		b := newBlocker()
		k, err := c.StartTool(ctx, taskTool, public, func(context.Context, catalog.Call) (catalog.Result, error) {
			<-b.release // heedless of its consumer's death
			return catalog.TextResult("late"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		tk := startTask(t, c, "alice")
		_, ch := watch(t, c, tk.ID())
		cancel()
		<-k.Done()
		<-retiring // the after-death function is held before it ends the tasks
		b.let()
		changed(t, ch, "the body's return after the death")
		if info := wait(t, tk); info.Status != catalog.TaskFailed || !errors.Is(info.Err, catalog.ErrRouteGone) {
			t.Fatalf("a body that returned after its consumer's death: %+v, want failed with ErrRouteGone", info)
		}
	})
}

// slowRelease is a Claimer whose releases wait for hold to close.
type slowRelease chan struct{}

func (h slowRelease) Claim(context.Context, catalog.Claim) (func(), error) {
	return func() { <-h }, nil
}
