package mcpserve_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// taskCall sends one 2026-07-28 request, negotiating the tasks extension
// when ext is set, with name in Mcp-Name, as bearer; it returns the HTTP
// status and the result or error.
func taskCall(t *testing.T, url, method, name string, params map[string]any, ext bool, bearer string) (int, map[string]any, map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if ext {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return request2026(t, url, method, name, bearer, params, caps)
}

// Over the wire a task-supporting tool called by a client that
// negotiates tasks runs as a task: a flat CreateTaskResult, tasks/get
// until it completes with the result inlined, seen with the caller's
// credential alone; tasks/cancel ends one; a client that did not
// negotiate gets a plain call, or -32021 for a tool that runs as a task
// only, and tasks/* refuse it; Mcp-Name must name the task. On the
// default endpoint and a stateless one.
func TestTasksOnTheWire(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	ctx := context.Background()
	start := func(tool catalog.Tool, h catalog.ToolHandler) *catalog.Consumer {
		k, err := cat.StartTool(ctx, tool, bindsec.Plan{Public: true}, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sctx, cancel := context.WithTimeout(ctx, time.Second); defer cancel(); _ = k.Stop(sctx) })
		return k
	}
	release := make(chan struct{})
	start(catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
			if string(c.Arguments) == `{"wait":true}` {
				select {
				case <-release:
				case <-ctx.Done():
					return catalog.Result{}, ctx.Err()
				}
			}
			return catalog.TextResult("job done"), nil
		})
	})
	start(catalog.Tool{Name: "only-task", TaskSupport: catalog.TaskRequired}, func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		return c.Detach(ctx, func(context.Context) (catalog.Result, error) { return catalog.TextResult("ok"), nil })
	})
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			f := newFixture(t, cat, mcpserve.Options{Stateless: stateless})
			url := f.http.URL
			_, res, rpcErr := taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{"wait": true}}, true, "alice")
			id, _ := res["taskId"].(string)
			if rpcErr != nil || res["resultType"] != "task" || id == "" || res["status"] != "working" || res["ttlMs"] == nil {
				t.Fatalf("call: %v %v, want a CreateTaskResult", res, rpcErr)
			}
			get := func(bearer string) (int, map[string]any, map[string]any) {
				return taskCall(t, url, "tasks/get", id, map[string]any{"taskId": id}, true, bearer)
			}
			if _, res, _ := get("alice"); res["status"] != "working" || res["resultType"] != "complete" {
				t.Fatalf("tasks/get while working: %v", res)
			}
			if status, _, rpcErr := get("mallory"); status != http.StatusBadRequest || rpcErr["code"] != float64(-32602) {
				t.Errorf("another credential's tasks/get: HTTP %d %v, want 400 -32602", status, rpcErr)
			}
			if status, _, rpcErr := taskCall(t, url, "tasks/get", "another-name", map[string]any{"taskId": id}, true, "alice"); status != http.StatusBadRequest || rpcErr["code"] != float64(-32020) {
				t.Errorf("Mcp-Name not the task: HTTP %d %v, want 400 -32020", status, rpcErr)
			}
			if status, _, rpcErr := taskCall(t, url, "tasks/get", id, map[string]any{"taskId": id}, false, "alice"); status != http.StatusBadRequest || rpcErr["code"] != float64(-32021) {
				t.Errorf("tasks/get without the extension: HTTP %d %v, want 400 -32021", status, rpcErr)
			}
			release <- struct{}{}
			var info map[string]any
			for range 200 {
				if _, info, _ = get("alice"); info["status"] != "working" {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			result, _ := info["result"].(map[string]any)
			if info["status"] != "completed" || !strings.Contains(fmt.Sprint(result["content"]), "job done") {
				t.Fatalf("tasks/get once done: %v", info)
			}
			// Cancelled while it works.
			_, res, _ = taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{"wait": true}}, true, "alice")
			id = res["taskId"].(string)
			if _, ack, rpcErr := taskCall(t, url, "tasks/cancel", id, map[string]any{"taskId": id}, true, "alice"); rpcErr != nil || ack["resultType"] != "complete" || ack["status"] != nil {
				t.Fatalf("tasks/cancel: %v %v", ack, rpcErr)
			}
			if _, res, _ := get("alice"); res["status"] != "cancelled" {
				t.Errorf("after tasks/cancel: %v", res)
			}
			// Without the extension: a call, or -32021 for a task-only tool.
			if _, res, rpcErr := taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, false, ""); rpcErr != nil || res["resultType"] != "complete" || res["taskId"] != nil {
				t.Errorf("a call without the extension: %v %v", res, rpcErr)
			}
			if status, _, rpcErr := taskCall(t, url, "tools/call", "only-task", map[string]any{"name": "only-task", "arguments": map[string]any{}}, false, ""); status != http.StatusBadRequest || rpcErr["code"] != float64(-32021) {
				t.Errorf("a task-only tool without the extension: HTTP %d %v, want 400 -32021", status, rpcErr)
			}
		})
	}
}

// A task whose consumer dies reads failed on the next tasks/get, with
// the JSON-RPC error of a route gone, and a successor never touches it.
func TestTaskFailsWithItsConsumerOnTheWire(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1)
	k, err := cat.StartTool(ctx, catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(context.Context) (catalog.Result, error) {
				started <- struct{}{}
				time.Sleep(50 * time.Millisecond) // heedless of its consumer's death
				return catalog.TextResult("late"), nil
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	url := newFixture(t, cat, mcpserve.Options{}).http.URL
	_, res, _ := taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, true, "")
	id, _ := res["taskId"].(string)
	if id == "" {
		t.Fatalf("no task: %v", res)
	}
	<-started
	// Until here the consumer must not be dropped: a collection would
	// kill it (the drop path) before the call, and fail the test.
	runtime.KeepAlive(k)
	cancel() // the consumer dies by its context
	for range 200 {
		if _, err := cat.CallTool(context.Background(), "job", nil, ""); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, info, _ := taskCall(t, url, "tasks/get", id, map[string]any{"taskId": id}, true, "")
	taskErr, _ := info["error"].(map[string]any)
	if info["status"] != "failed" || taskErr["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(taskErr["message"]), "route gone") {
		t.Fatalf("after the death: %v, want failed with a route gone", info)
	}
}

// Through another replica a client that takes tasks gets the call run to
// its end on the holder, as one that takes none: tasks are not forwarded.
func TestForwardedCallTakesNoTask(t *testing.T) {
	stateless := func(o *mcpserve.Options) { o.Stateless = true }
	a, b := newReplica(t, stateless), newReplica(t, stateless)
	k, err := b.cat.StartTool(context.Background(), catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(context.Context) (catalog.Result, error) { return catalog.TextResult("done in the call"), nil })
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	a.peers.set("tool", "job", b.fleet)
	_, res, rpcErr := taskCall(t, a.url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, true, goodToken)
	if rpcErr != nil || res["taskId"] != nil || !strings.Contains(fmt.Sprint(res["content"]), "done in the call") {
		t.Fatalf("forwarded: %v %v, want the call's result", res, rpcErr)
	}
}

// At the task store's cap a call that would start a task gets -32029,
// overloaded, and starts nothing.
func TestTaskCapOnTheWire(t *testing.T) {
	cat := newCatalog(t, catalog.Config{MaxTasksPerCaller: 1})
	release := make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return catalog.TextResult("done"), nil
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); _ = k.Stop(context.Background()) })
	url := newFixture(t, cat, mcpserve.Options{}).http.URL
	call := func() (map[string]any, map[string]any) {
		_, res, rpcErr := taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, true, "alice")
		return res, rpcErr
	}
	if res, rpcErr := call(); rpcErr != nil || res["taskId"] == nil {
		t.Fatalf("the first task: %v %v", res, rpcErr)
	}
	if res, rpcErr := call(); rpcErr["code"] != float64(-32029) {
		t.Fatalf("beyond the cap: %v %v, want -32029", res, rpcErr)
	}
}
