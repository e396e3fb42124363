package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// blocker is a task body that waits to be let go, then answers "done".
type blocker struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocker) body(ctx context.Context, c catalog.Call) (catalog.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return catalog.TextResult("done"), nil
	case <-ctx.Done():
		return catalog.Result{}, ctx.Err()
	}
}

func (b *blocker) let() { b.once.Do(func() { close(b.release) }) }

var taskTool = catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}

func startTask(t *testing.T, c *catalog.Catalog, cred string) *catalog.Task {
	t.Helper()
	tk, err := c.StartTask(bg, "job", nil, cred)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func wait(t *testing.T, tk *catalog.Task) catalog.TaskInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	info, err := tk.Wait(ctx)
	if err != nil {
		t.Fatalf("task %s did not end: %v", tk.ID(), err)
	}
	return info
}

// A task runs its body apart from its caller, completes with what the
// call would have returned, and is seen with its own credential alone.
func TestTaskCompletes(t *testing.T) {
	// c's tool forbids tasks (the zero TaskSupport); c2's allows them.
	c := newCatalog(t, catalog.Config{})
	b := newBlocker()
	startTool(t, c, bg, "job", public, b.body)
	c2 := newCatalog(t, catalog.Config{})
	k, err := c2.StartTool(bg, taskTool, public, b.body)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop(bg)
	if _, err := c.StartTask(bg, "job", nil, ""); !errors.Is(err, catalog.ErrInvalidRequest) {
		t.Fatalf("a task of a tool that forbids them: %v", err)
	}
	tk := startTask(t, c2, "alice")
	<-b.started
	if info, err := c2.GetTask(tk.ID(), "alice"); err != nil || info.Status != catalog.TaskWorking {
		t.Fatalf("while it runs: %+v %v", info, err)
	}
	for _, cred := range []string{"", "bob"} {
		if _, err := c2.GetTask(tk.ID(), cred); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("another credential %q: %v, want ErrNotFound", cred, err)
		}
	}
	if _, err := c2.GetTask("no-such-task", "alice"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("an unknown id: %v", err)
	}
	b.let()
	info := wait(t, tk)
	if info.Status != catalog.TaskCompleted || info.Err != nil || info.Result.Content[0].Text != "done" || info.Expires.IsZero() {
		t.Fatalf("ended as %+v", info)
	}
	if len(tk.ID()) != 22 {
		t.Errorf("id %q is not 128 bits, base64url", tk.ID())
	}
}

// A task whose consumer dies, by each of the four paths, reads failed at
// once with ErrRouteGone, and stays failed whatever its body does after;
// a successor of the same name never touches it.
func TestTaskDiesWithItsConsumer(t *testing.T) {
	for _, death := range []string{"stop", "cancel", "panic", "drop"} {
		t.Run(death, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			b := newBlocker()
			var tk *catalog.Task
			var done <-chan struct{}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			var k *catalog.Consumer
			if death == "drop" {
				tk, done = startDroppedTask(t, c, b)
			} else {
				var err error
				k, err = c.StartTool(ctx, taskTool, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
					if string(call.Arguments) == `{"panic":true}` {
						panic("told to")
					}
					return b.body(ctx, call)
				})
				if err != nil {
					t.Fatal(err)
				}
				done = k.Done()
				tk = startTask(t, c, "alice")
			}
			<-b.started
			switch death {
			case "stop":
				// Stop drains a running task's body, bounded by its ctx;
				// then the consumer is dead.
				sctx, scancel := context.WithTimeout(bg, 20*time.Millisecond)
				defer scancel()
				if err := k.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Stop with a task running: %v", err)
				}
			case "cancel":
				cancel()
			case "panic":
				if _, err := c.CallTool(bg, "job", []byte(`{"panic":true}`), ""); !errors.Is(err, catalog.ErrRoutePanicked) {
					t.Fatal(err)
				}
			case "drop":
				for i := 0; i < 100; i++ {
					runtime.GC()
					select {
					case <-done:
						i = 100
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			<-done
			info, err := c.GetTask(tk.ID(), "alice")
			if err != nil || info.Status != catalog.TaskFailed || !errors.Is(info.Err, catalog.ErrRouteGone) {
				t.Fatalf("after the death: %+v %v, want failed with ErrRouteGone", info, err)
			}
			// A successor of the name runs its own tasks, never this one.
			succ := newBlocker()
			k2, err := c.StartTool(bg, taskTool, public, succ.body)
			if err != nil {
				t.Fatal(err)
			}
			defer k2.Stop(bg)
			succ.let()
			b.let()
			if info := wait(t, tk); info.Status != catalog.TaskFailed {
				t.Errorf("once its body returned: %+v", info)
			}
			if info := wait(t, startTask(t, c, "alice")); info.Status != catalog.TaskCompleted {
				t.Errorf("the successor's task: %+v", info)
			}
		})
	}
}

// startDroppedTask starts the task tool and a task of it, and keeps nothing of
// the consumer.
//
//go:noinline
func startDroppedTask(t *testing.T, c *catalog.Catalog, b *blocker) (*catalog.Task, <-chan struct{}) {
	k, err := c.StartTool(bg, taskTool, public, b.body)
	if err != nil {
		t.Fatal(err)
	}
	return startTask(t, c, "alice"), k.Done()
}

// A task is bounded: at a cap StartTask refuses with ErrTooManyTasks and
// starts nothing; an ended task counts until its TTL is up, then is gone,
// and its place is free; a result over the budget fails its task.
func TestTaskBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newCatalog(t, catalog.Config{MaxTasks: 3, MaxTasksPerCaller: 2, TaskTTL: time.Minute, MaxTaskResultBytes: 100})
	c.SetTaskClock(clock)
	var big atomic.Bool
	k, err := c.StartTool(bg, taskTool, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		if big.Load() {
			return catalog.TextResult(string(make([]byte, 200))), nil
		}
		return catalog.TextResult("ok"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop(bg)
	a1, a2 := startTask(t, c, "alice"), startTask(t, c, "alice")
	if _, err := c.StartTask(bg, "job", nil, "alice"); !errors.Is(err, catalog.ErrTooManyTasks) {
		t.Fatalf("alice's third: %v", err)
	}
	b1 := startTask(t, c, "bob")
	if _, err := c.StartTask(bg, "job", nil, "carol"); !errors.Is(err, catalog.ErrTooManyTasks) {
		t.Fatalf("the fourth in all: %v", err)
	}
	// Every task ends before the clock moves: one that ended after would
	// be kept a TTL from then.
	wait(t, a1)
	wait(t, a2)
	wait(t, b1)
	if got, want := c.Stats().Tasks, (catalog.TaskCounts{Held: 3, MostPerCaller: 2, ResultBytes: c.Stats().Tasks.ResultBytes}); got != want || got.ResultBytes <= 0 {
		t.Fatalf("Stats().Tasks = %+v, want %+v with results counted", got, want)
	}
	advance(59 * time.Second)
	if _, err := c.GetTask(a1.ID(), "alice"); err != nil {
		t.Fatalf("before its TTL: %v", err)
	}
	advance(2 * time.Second)
	if _, err := c.GetTask(a1.ID(), "alice"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("after its TTL: %v", err)
	}
	if got := c.Stats().Tasks; got != (catalog.TaskCounts{}) {
		t.Fatalf("Stats().Tasks once all expired = %+v, want none", got)
	}
	big.Store(true)
	info := wait(t, startTask(t, c, "alice"))
	if info.Status != catalog.TaskFailed || !errors.Is(info.Err, catalog.ErrTooManyTasks) {
		t.Fatalf("a result over the budget: %+v", info)
	}
}

// CancelTask ends a working task at once, cancelled, and its body's
// context with it; on an ended task it changes nothing; another
// credential cannot.
func TestTaskCancel(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	b := newBlocker()
	k, err := c.StartTool(bg, taskTool, public, b.body)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop(bg)
	tk := startTask(t, c, "alice")
	<-b.started
	if err := c.CancelTask(tk.ID(), "bob"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("bob cancels: %v", err)
	}
	if err := c.CancelTask(tk.ID(), "alice"); err != nil {
		t.Fatal(err)
	}
	if info := wait(t, tk); info.Status != catalog.TaskCancelled {
		t.Fatalf("after cancel: %+v", info)
	}
	if err := c.CancelTask(tk.ID(), "alice"); err != nil {
		t.Fatalf("a second cancel: %v", err)
	}
	// The body saw its context end and returned: Stop drains nothing.
	sctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := k.Stop(sctx); err != nil {
		t.Fatalf("Stop after the cancel: %v", err)
	}
}

// A task's body asks a caller that answers through the task: the task
// reads input_required with the open questions, a partial answer leaves
// only the ones still open, and once all are answered the body goes on
// with them. A caller that answers nothing gets the body's
// CapabilityError, as a call does; a task that ends while its body waits
// lets the body go.
func TestTaskAsks(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k, err := c.StartTool(bg, taskTool, public, func(ctx context.Context, call catalog.Call) (catalog.Result, error) {
		a, err := catalog.Ask(ctx,
			catalog.InputRequest{Key: "name", Elicit: &catalog.ElicitRequest{Message: "name?"}},
			catalog.InputRequest{Key: "roots", ListRoots: true})
		if err != nil {
			return catalog.Result{}, err
		}
		return catalog.TextResult(fmt.Sprintf("%v in %s", a[0].Elicit.Content["n"], a[1].Roots[0].URI)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Bounded: a body left waiting for input must not hang the test.
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		_ = k.Stop(ctx)
	}()
	answering := catalog.WithClient(&catalog.Client{Round: &catalog.Round{Elicitation: true, Roots: true}})
	tk, err := c.StartTask(bg, "job", nil, "alice", answering)
	if err != nil {
		t.Fatal(err)
	}
	open := func() []string {
		for range 500 {
			info, err := c.GetTask(tk.ID(), "alice")
			if err != nil {
				t.Fatal(err)
			}
			if info.Status == catalog.TaskInputRequired {
				var keys []string
				for _, q := range info.Requests {
					keys = append(keys, q.Key)
				}
				return keys
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatal("the task never read input_required")
		return nil
	}
	if keys := open(); len(keys) != 2 {
		t.Fatalf("open questions %v, want name and roots", keys)
	}
	roots := catalog.InputResponse{Roots: []catalog.Root{{URI: "file:///w"}}}
	if err := c.UpdateTask(tk.ID(), "bob", map[string]catalog.InputResponse{"roots": roots}); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("bob answers: %v", err)
	}
	if err := c.UpdateTask(tk.ID(), "alice", map[string]catalog.InputResponse{"roots": roots, "extra": roots}); err != nil {
		t.Fatal(err)
	}
	if keys := open(); len(keys) != 1 || keys[0] != "name" {
		t.Fatalf("after a partial answer: %v, want name alone", keys)
	}
	name := catalog.InputResponse{Elicit: catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"n": "Ada"}}}
	if err := c.UpdateTask(tk.ID(), "alice", map[string]catalog.InputResponse{"name": name}); err != nil {
		t.Fatal(err)
	}
	if info := wait(t, tk); info.Status != catalog.TaskCompleted || info.Result.Content[0].Text != "Ada in file:///w" {
		t.Fatalf("ended %+v", info)
	}

	// A caller that answers nothing: the body's error, completed.
	if info := wait(t, startTask(t, c, "alice")); !errors.Is(info.Err, catalog.ErrNotSupported) {
		t.Fatalf("without answers: %+v", info)
	}
	// Cancelled while it waits for input: the body is let go.
	tk, err = c.StartTask(bg, "job", nil, "alice", answering)
	if err != nil {
		t.Fatal(err)
	}
	open()
	if err := c.CancelTask(tk.ID(), "alice"); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := k.Stop(sctx); err != nil {
		t.Fatalf("Stop with a cancelled task's body: %v", err)
	}
}
