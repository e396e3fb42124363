package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// streamMessage is one JSON-RPC message of a listen stream.
type streamMessage struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  map[string]any  `json:"error"`
}

// listenStream is an open 2026-07-28 subscriptions/listen over HTTP: its
// messages as they come, and the channel closed when its response ends.
type listenStream struct {
	status int
	msgs   chan streamMessage
}

// openListen opens a subscriptions/listen with filter as bearer,
// negotiating the tasks extension when ext is set. The stream ends with
// the test, if not before.
func openListen(t *testing.T, url, bearer string, filter map[string]any, ext bool) *listenStream {
	t.Helper()
	caps := map[string]any{}
	if ext {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": filter,
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ls := &listenStream{status: resp.StatusCode, msgs: make(chan streamMessage)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(ls.msgs)
		defer resp.Body.Close()
		sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data := sc.Text()
			if sse {
				var ok bool
				if data, ok = strings.CutPrefix(data, "data: "); !ok {
					continue
				}
			}
			var m streamMessage
			if strings.TrimSpace(data) == "" || json.Unmarshal([]byte(data), &m) != nil {
				continue
			}
			select {
			case ls.msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-read })
	return ls
}

// next returns the stream's next message; it fails the test if none
// comes at once, or the stream ends.
func (ls *listenStream) next(t *testing.T, what string) streamMessage {
	t.Helper()
	select {
	case m, ok := <-ls.msgs:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return m
	case <-time.After(eventGuard):
		t.Fatalf("%s: no message", what)
	}
	return streamMessage{}
}

// ended fails the test unless the stream's next message is its result
// and the stream then ends.
func (ls *listenStream) ended(t *testing.T, what string) {
	t.Helper()
	if m := ls.next(t, what); m.Result == nil {
		t.Fatalf("%s: %+v, want the listen's result", what, m)
	}
	select {
	case m, ok := <-ls.msgs:
		if ok {
			t.Fatalf("%s: %+v after the listen's result", what, m)
		}
	case <-time.After(eventGuard):
		t.Fatalf("%s: the stream did not end", what)
	}
}

// acked reads the acknowledgement, and returns the task IDs it agreed to.
func (ls *listenStream) acked(t *testing.T) []string {
	t.Helper()
	m := ls.next(t, "the acknowledgement")
	n, _ := m.Params["notifications"].(map[string]any)
	raw, ok := n["taskIds"].([]any)
	if m.Method != "notifications/subscriptions/acknowledged" || !ok {
		t.Fatalf("first message %+v, want an acknowledgement with taskIds", m)
	}
	ids := []string{}
	for _, id := range raw {
		ids = append(ids, fmt.Sprint(id))
	}
	return ids
}

// taskStatus checks that m is a notifications/tasks of task id, in the
// DetailedTask form and tagged with its listen's request ID, and returns
// its status.
func taskStatus(t *testing.T, m streamMessage, id string) string {
	t.Helper()
	meta, _ := m.Params["_meta"].(map[string]any)
	if m.Method != "notifications/tasks" || m.Params["taskId"] != id || m.Params["resultType"] != nil ||
		m.Params["createdAt"] == nil || meta["io.modelcontextprotocol/subscriptionId"] != float64(7) {
		t.Fatalf("%+v, want notifications/tasks of %s", m, id)
	}
	return fmt.Sprint(m.Params["status"])
}

// startTaskTool starts tool name, which runs as a task: its body detaches
// into rest.
func startTaskTool(t *testing.T, cat *catalog.Catalog, ctx context.Context, name string, rest func(context.Context) (catalog.Result, error)) *catalog.Consumer {
	t.Helper()
	k, err := cat.StartTool(ctx, catalog.Tool{Name: name, TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) { return c.Detach(ctx, rest) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = k.Stop(sctx)
	})
	return k
}

// startTaskOf calls name as bearer, taking tasks and answering roots, and
// returns the task's ID.
func startTaskOf(t *testing.T, url, name, bearer string) string {
	t.Helper()
	caps := map[string]any{"roots": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	_, res, rpcErr := request2026(t, url, "tools/call", name, bearer, map[string]any{"name": name, "arguments": map[string]any{}}, caps)
	id, _ := res["taskId"].(string)
	if id == "" {
		t.Fatalf("call %s: %v %v, want a task", name, res, rpcErr)
	}
	return id
}

// A listen stream that names a task hears it change as it changes, in
// order: working as the stream opened, input_required with the questions
// once the body asks, working once tasks/update answered them, then
// completed with the result, the last; then, with nothing else to send,
// the stream ends. An unknown ID is left out of the acknowledgement.
func TestTaskNotifications(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	asking, release := make(chan struct{}), make(chan struct{})
	startTaskTool(t, cat, context.Background(), "ask", func(ctx context.Context) (catalog.Result, error) {
		select {
		case <-asking:
		case <-ctx.Done():
			return catalog.Result{}, ctx.Err()
		}
		a, err := catalog.Ask(ctx, catalog.InputRequest{Key: "where", ListRoots: true})
		if err != nil {
			return catalog.Result{}, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return catalog.Result{}, ctx.Err()
		}
		return catalog.TextResult("done in " + a[0].Roots[0].URI), nil
	})
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			url := newFixture(t, cat, mcpserve.Options{Stateless: stateless}).http.URL
			id := startTaskOf(t, url, "ask", "alice")
			ls := openListen(t, url, "alice", map[string]any{"taskIds": []string{"no-such-task", id}}, true)
			if ids := ls.acked(t); !slices.Equal(ids, []string{id}) {
				t.Fatalf("acknowledged %v, want [%s]", ids, id)
			}
			if st := taskStatus(t, ls.next(t, "the task as the stream opened"), id); st != "working" {
				t.Fatalf("at first: %s, want working", st)
			}
			asking <- struct{}{}
			m := ls.next(t, "input_required")
			reqs, _ := m.Params["inputRequests"].(map[string]any)
			if taskStatus(t, m, id) != "input_required" || reqs["where"] == nil {
				t.Fatalf("%+v, want input_required asking where", m.Params)
			}
			answer := map[string]any{"where": map[string]any{"roots": []any{map[string]any{"uri": "file:///w"}}}}
			if _, _, rpcErr := taskCall(t, url, "tasks/update", id, map[string]any{"taskId": id, "inputResponses": answer}, true, "alice"); rpcErr != nil {
				t.Fatalf("tasks/update: %v", rpcErr)
			}
			if st := taskStatus(t, ls.next(t, "working again"), id); st != "working" {
				t.Fatalf("after tasks/update: %s, want working", st)
			}
			release <- struct{}{}
			m = ls.next(t, "completed")
			result, _ := m.Params["result"].(map[string]any)
			if taskStatus(t, m, id) != "completed" || !strings.Contains(fmt.Sprint(result["content"]), "done in file:///w") {
				t.Fatalf("%+v, want completed with the result", m.Params)
			}
			ls.ended(t, "once its only task ended")
		})
	}
}

// A task whose consumer dies is heard failed at once, on a stream that
// carries list_changed too, though its body goes on heedless: the owner
// rule, pushed. The stream then goes on with the SDK's list_changed.
func TestTaskNotificationOnConsumerDeath(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heedless := make(chan struct{})
	defer close(heedless)
	startTaskTool(t, cat, ctx, "job", func(context.Context) (catalog.Result, error) {
		<-heedless
		return catalog.TextResult("late"), nil
	})
	url := newFixture(t, cat, mcpserve.Options{}).http.URL
	id := startTaskOf(t, url, "job", "alice")
	ls := openListen(t, url, "alice", map[string]any{"taskIds": []string{id}, "toolsListChanged": true}, true)
	if ids := ls.acked(t); !slices.Equal(ids, []string{id}) {
		t.Fatalf("acknowledged %v, want [%s]", ids, id)
	}
	if st := taskStatus(t, ls.next(t, "the task as the stream opened"), id); st != "working" {
		t.Fatalf("at first: %s, want working", st)
	}
	cancel() // the consumer dies by its context
	var heard, listChanged bool
	for !heard || !listChanged {
		m := ls.next(t, "the death")
		if m.Method == "notifications/tools/list_changed" {
			listChanged = true
			continue
		}
		taskErr, _ := m.Params["error"].(map[string]any)
		if taskStatus(t, m, id) != "failed" || taskErr["code"] != float64(-32602) || !strings.Contains(fmt.Sprint(taskErr["message"]), "route gone") {
			t.Fatalf("%+v, want failed with a route gone", m.Params)
		}
		heard = true
	}
}

// Another credential's task is not acknowledged, exactly as an unknown
// one, and its changes are never heard; a listen that asks for tasks
// without the extension is -32021.
func TestTaskNotificationsOtherCredential(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	startTaskTool(t, cat, context.Background(), "job", func(ctx context.Context) (catalog.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return catalog.TextResult("done"), nil
	})
	url := newFixture(t, cat, mcpserve.Options{}).http.URL
	id := startTaskOf(t, url, "job", "alice")

	ls := openListen(t, url, "mallory", map[string]any{"taskIds": []string{id}}, true)
	if ids := ls.acked(t); len(ids) != 0 {
		t.Fatalf("mallory's listen acknowledged %v, want none", ids)
	}
	ls.ended(t, "a listen with nothing agreed")

	ls = openListen(t, url, "mallory", map[string]any{"taskIds": []string{id}, "toolsListChanged": true}, true)
	if ids := ls.acked(t); len(ids) != 0 {
		t.Fatalf("mallory's listen acknowledged %v, want none", ids)
	}
	close(release)
	for {
		if _, info, _ := taskCall(t, url, "tasks/get", id, map[string]any{"taskId": id}, true, "alice"); info["status"] == "completed" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// A change of the tools list: the next message, and nothing of the
	// task before it.
	startText(t, cat, context.Background(), "marker", "x")
	if m := ls.next(t, "list_changed"); m.Method != "notifications/tools/list_changed" {
		t.Fatalf("mallory heard %+v", m)
	}

	nx := openListen(t, url, "alice", map[string]any{"taskIds": []string{id}}, false)
	if m := nx.next(t, "the refusal"); nx.status != http.StatusBadRequest || m.Error["code"] != float64(-32021) {
		t.Fatalf("without the extension: HTTP %d %+v, want 400 -32021", nx.status, m)
	}
}

// A stream watches at most MaxListenTaskIDs tasks: the first of its
// filter; the rest are left out of the acknowledgement and never heard.
func TestTaskNotificationsCap(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	startTaskTool(t, cat, context.Background(), "job", func(ctx context.Context) (catalog.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return catalog.TextResult("done"), nil
	})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL
	ids := make([]string, mcpserve.MaxListenTaskIDs+1)
	for i := range ids {
		ids[i] = startTaskOf(t, url, "job", "alice")
	}
	ls := openListen(t, url, "alice", map[string]any{"taskIds": ids}, true)
	if got := ls.acked(t); !slices.Equal(got, ids[:mcpserve.MaxListenTaskIDs]) {
		t.Fatalf("acknowledged %d IDs, want the first %d", len(got), mcpserve.MaxListenTaskIDs)
	}
	close(release)
	// Each watched task: its state at first, then completed (the two
	// may be one when it ended before the stream looked).
	ended := map[string]bool{}
	for len(ended) < mcpserve.MaxListenTaskIDs {
		m := ls.next(t, "the watched tasks")
		id, _ := m.Params["taskId"].(string)
		if id == ids[mcpserve.MaxListenTaskIDs] || !slices.Contains(ids, id) {
			t.Fatalf("heard %+v, beyond the cap", m)
		}
		if taskStatus(t, m, id) == "completed" {
			ended[id] = true
		}
	}
	ls.ended(t, "once every watched task ended")
}

// Close ends a listen stream that watches a task still working: the
// watcher stops with the stream.
func TestCloseEndsTaskListen(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	defer close(release)
	startTaskTool(t, cat, context.Background(), "job", func(ctx context.Context) (catalog.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return catalog.TextResult("done"), nil
	})
	f := newFixture(t, cat, mcpserve.Options{})
	id := startTaskOf(t, f.http.URL, "job", "alice")
	ls := openListen(t, f.http.URL, "alice", map[string]any{"taskIds": []string{id}}, true)
	if ids := ls.acked(t); !slices.Equal(ids, []string{id}) {
		t.Fatalf("acknowledged %v, want [%s]", ids, id)
	}
	if st := taskStatus(t, ls.next(t, "the task as the stream opened"), id); st != "working" {
		t.Fatalf("at first: %s, want working", st)
	}
	_ = f.srv.Close()
	for {
		select {
		case m, ok := <-ls.msgs:
			if !ok {
				return
			}
			if m.Result == nil {
				t.Fatalf("at Close: %+v, want the stream's end", m)
			}
		case <-time.After(eventGuard):
			t.Fatal("Close did not end the stream")
		}
	}
}
