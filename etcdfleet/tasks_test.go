package etcdfleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// rpc2026 sends one 2026-07-28 request that negotiates the tasks
// extension to url, and returns the HTTP status, result and error.
func rpc2026(t *testing.T, url, method, name string, params map[string]any) (int, map[string]any, map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndex(got, []byte("data: ")); i >= 0 {
		got = bytes.TrimSpace(got[i+len("data: "):])
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(got, &msg); err != nil {
		t.Fatalf("%s: %q is no JSON-RPC response", method, got)
	}
	return resp.StatusCode, msg.Result, msg.Error
}

// startJob starts on s a public tool that runs as a task when its caller
// takes one and ends when release closes.
func (s *served) startJob(t *testing.T, ctx context.Context, name string, release <-chan struct{}) *catalog.Consumer {
	t.Helper()
	k, err := s.cat.StartTool(ctx, catalog.Tool{Name: name, TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				select {
				case <-release:
					return catalog.TextResult(name + " ran on " + s.Name()), nil
				case <-ctx.Done():
					return catalog.Result{}, ctx.Err()
				}
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	s.keep(k)
	return k
}

func taskGet(t *testing.T, url, id string) (map[string]any, map[string]any) {
	t.Helper()
	_, res, rpcErr := rpc2026(t, url, "tasks/get", id, map[string]any{"taskId": id})
	return res, rpcErr
}

// A task started through replica a runs on c, the holder of its tool, and
// is read through b, which never saw the call: working, then completed
// with its result. When c's consumer dies the task reads failed through b
// at once. When c crashes, b answers a retryable CodePeerUnavailable
// while c's lease stands, and failed, reason replica_lost, once it
// expired; never working, and never "unknown".
func TestTasksAcrossTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a, b, c := newServed(t, ep, "a"), newServed(t, ep, "b"), newServed(t, ep, "c")
	life := lifeFor(t)
	release := make(chan struct{})
	c.startJob(t, life, "job", release)
	waitListed(t, a.cat, "c's tool listed on a", func() bool { return listed(a.cat, "job") })

	_, res, rpcErr := rpc2026(t, a.url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}})
	id, _ := res["taskId"].(string)
	if rpcErr != nil || res["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call through a: %v %v, want a CreateTaskResult", res, rpcErr)
	}
	if res, rpcErr := taskGet(t, b.url, id); rpcErr != nil || res["status"] != "working" {
		t.Fatalf("tasks/get through b: %v %v, want working", res, rpcErr)
	}
	close(release)
	for {
		res, rpcErr := taskGet(t, b.url, id)
		if rpcErr != nil {
			t.Fatalf("tasks/get through b: %v", rpcErr)
		}
		if res["status"] == "working" {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if res["status"] != "completed" || !strings.Contains(fmt.Sprint(res["result"]), "job ran on c") {
			t.Fatalf("tasks/get through b once done: %v", res)
		}
		break
	}

	// The consumer dies: its task reads failed, on b, at once.
	kctx, kill := context.WithCancel(life)
	hold := make(chan struct{})
	defer close(hold)
	k := c.startJob(t, kctx, "mortal", hold)
	waitListed(t, a.cat, "mortal listed on a", func() bool { return listed(a.cat, "mortal") })
	_, res, _ = rpc2026(t, a.url, "tools/call", "mortal", map[string]any{"name": "mortal", "arguments": map[string]any{}})
	id, _ = res["taskId"].(string)
	kill()
	waitDone(t, k)
	if res, rpcErr := taskGet(t, b.url, id); rpcErr != nil || res["status"] != "failed" {
		t.Fatalf("tasks/get through b after its consumer died: %v %v, want failed", res, rpcErr)
	}

	// c crashes.
	c.startJob(t, life, "doomed", hold)
	waitListed(t, a.cat, "doomed listed on a", func() bool { return listed(a.cat, "doomed") })
	_, res, _ = rpc2026(t, a.url, "tools/call", "doomed", map[string]any{"name": "doomed", "arguments": map[string]any{}})
	id, _ = res["taskId"].(string)
	c.shut()
	c.Crash()
	crashed := time.Now()
	retryable := 0
	for {
		res, rpcErr := taskGet(t, b.url, id)
		data, _ := json.Marshal(rpcErr["data"])
		if rpcErr["code"] == float64(mcpserve.CodePeerUnavailable) && strings.Contains(string(data), `"retryable":true`) {
			retryable++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		e, _ := res["error"].(map[string]any)
		if rpcErr != nil || res["status"] != "failed" || !strings.Contains(fmt.Sprint(e["data"]), "replica_lost") {
			t.Fatalf("tasks/get through b after c crashed: %v %v (%d retryable answers before)", res, rpcErr, retryable)
		}
		break
	}
	if retryable == 0 {
		t.Fatal("no retryable answer while the crashed holder's lease stood")
	}
	t.Logf("a crashed holder's task read failed %v after the crash (TTL 1 s), after %d retryable answers", time.Since(crashed).Round(time.Millisecond), retryable)
}
