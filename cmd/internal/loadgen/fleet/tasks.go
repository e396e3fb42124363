package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/mcpserve"
)

// Tasks across the fleet (invariants 9 and 10). A tasker calls a tool as
// a client of 2026-07-28 that takes tasks, through a random replica; the
// body notes which consumer runs the task (bodyRan), then detaches and
// answers with that consumer's tag and the task's nonce a moment later.
// The tasker reads the task through replicas other than its holder until
// it ends, and judges every read.

// taskHold is how long the rest of the task nonce runs: most end in
// 2 ms; one in four takes 300 ms, so that consumers die and replicas
// crash under tasks still working.
func taskHold(nonce uint64) time.Duration {
	if nonce%4 == 0 {
		return 300 * time.Millisecond
	}
	return 2 * time.Millisecond
}

// taskPatience bounds how long a tasker reads one task: a crashed
// holder's tasks read failed once its lease expired, a TTL after the
// crash, and the view has heard.
func (w *world) taskPatience() time.Duration { return w.cfg.TTL + 5*time.Second }

// taskBook maps each task's nonce to the consumer whose body took it.
type taskBook struct {
	nonce  atomic.Uint64
	owners sync.Map // nonce → *record

	started, completed, failedGone, failedLost, unavailable atomic.Int64
}

// bodyRan notes, from the body, that rec's consumer runs the task nonce.
func (b *taskBook) bodyRan(nonce uint64, rec *record) { b.owners.Store(nonce, rec) }

func (b *taskBook) owner(nonce uint64) *record {
	if v, ok := b.owners.Load(nonce); ok {
		return v.(*record)
	}
	return nil
}

// taskResult is the text a task's rest answers with.
func taskResult(rec *record, nonce uint64) string {
	return rec.tag + "#" + strconv.FormatUint(nonce, 10)
}

// tasker starts and reads tasks through random replicas until stop is
// closed.
func (w *world) tasker(ctx context.Context, index int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(3000+index)))
	w.throughReplicas(rng, stop, func(r *replica) {
		w.task(ctx, rng, r, w.names[rng.IntN(len(w.names))].name)
	})
}

// rpc2026 sends one JSON-RPC request of 2026-07-28, taking tasks, to r
// with the valid credential; it returns the result or the error object.
func rpc2026(ctx context.Context, r *replica, method, name string, params map[string]any) (map[string]any, map[string]any, error) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "livereg-loadgen-fleet", "version": "dev"},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", mcpserve.ProtocolStateless)
	h.Set("Mcp-Method", method)
	h.Set("Mcp-Name", name)
	hc := &http.Client{Transport: bearer.Transport{Next: r.tr, Token: tokenValid}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if i := bytes.LastIndex(got, []byte("data: ")); i >= 0 {
		got = bytes.TrimSpace(got[i+len("data: "):])
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(got, &msg); err != nil || msg.Result == nil && msg.Error == nil {
		return nil, nil, fmt.Errorf("HTTP %d: not a JSON-RPC response: %.120q", resp.StatusCode, got)
	}
	return msg.Result, msg.Error, nil
}

// errorCode and errorData read a JSON-RPC error object.
func errorCode(e map[string]any) int64 {
	c, _ := e["code"].(float64)
	return int64(c)
}

func errorData(e map[string]any) string {
	b, _ := json.Marshal(e["data"])
	return string(b)
}

// task calls name as a task through r and reads it until it ends.
func (w *world) task(ctx context.Context, rng *rand.Rand, r *replica, name string) {
	nonce := w.tasks.nonce.Add(1)
	defer w.tasks.owners.Delete(nonce)
	a := map[string]any{"seq": w.tick(), "cred": credValid, "via": r.id, "task": nonce}
	res, rpcErr, err := rpc2026(ctx, r, "tools/call", name, map[string]any{"name": name, "arguments": a})
	switch {
	case err != nil || rpcErr != nil:
		// Unknown, gone, unavailable: the calls' own checks judge these
		// answers; a task that never started is no task's concern.
		return
	case res["resultType"] != "task":
		if !r.down.Load() {
			w.t.Unexpected("tools/call %s as a task through %s: %v, not a task", name, r.name, res)
		}
		return
	}
	id, _ := res["taskId"].(string)
	rec := w.tasks.owner(nonce)
	if rec == nil {
		w.t.Unexpected("task %d of %s: created, though no body took it", nonce, name)
		return
	}
	w.tasks.started.Add(1)
	deadline := time.Now().Add(w.taskPatience())
	for time.Now().Before(deadline) {
		via := w.f.pickOther(rng, rec.rep)
		if via == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		began := w.tick()
		res, rpcErr, err := rpc2026(ctx, via, "tasks/get", id, map[string]any{"taskId": id})
		if err != nil {
			if !via.down.Load() && ctx.Err() == nil {
				w.t.Unexpected("tasks/get of %s's task through %s: %v", rec.tag, via.name, err)
			}
			continue
		}
		if rpcErr != nil {
			if errorCode(rpcErr) == mcpserve.CodePeerUnavailable && strings.Contains(errorData(rpcErr), `"retryable":true`) {
				w.tasks.unavailable.Add(1)
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if !via.down.Load() && ctx.Err() == nil {
				w.t.Unexpected("tasks/get of %s's task through %s: %v", rec.tag, via.name, rpcErr)
			}
			return
		}
		if w.judgeTaskRead(rec, nonce, began, via, res) {
			return
		}
		time.Sleep(500 * time.Microsecond)
	}
	if !rec.rep.crashed.Load() || w.pausing.Load() {
		w.t.Unexpected("task of %s (%s) still unresolved after %v", rec.tag, name, w.taskPatience())
	}
}

// judgeTaskRead checks one tasks/get of the task nonce, which rec's
// consumer took, read through via at clock reading began; it reports
// whether the task ended.
//
// Invariant 9, task_outlived_consumer: a read that began after the
// consumer was observed dead finds the task ended. Invariant 10,
// task_answered_by_other: a completed task's result is the one its own
// consumer's body gave for this task, and a task reads failed with
// replica_lost only once its holder crashed.
func (w *world) judgeTaskRead(rec *record, nonce, began uint64, via *replica, res map[string]any) bool {
	status, _ := res["status"].(string)
	w.t.Check(InvTaskOutlivedConsumer, 1)
	if (status == "working" || status == "input_required") && rec.diedBefore(began) {
		w.t.Violate(InvTaskOutlivedConsumer, "a task of %s read %s through %s at %d, after its consumer was observed dead at %d",
			rec.tag, status, via.name, began, rec.death.Load())
	}
	switch status {
	case "working", "input_required":
		return false
	case "completed":
		w.tasks.completed.Add(1)
		w.t.Check(InvTaskAnsweredByOther, 1)
		if got, want := resultText(res["result"]), taskResult(rec, nonce); got != want {
			w.t.Violate(InvTaskAnsweredByOther, "a task %s's body took read completed through %s with %q, not its own answer %q", rec.tag, via.name, got, want)
		}
	case "failed":
		data := errorData(asMap(res["error"]))
		w.t.Check(InvTaskAnsweredByOther, 1)
		switch {
		case strings.Contains(data, "replica_lost"):
			w.tasks.failedLost.Add(1)
			if !rec.rep.crashed.Load() && !rec.rep.down.Load() {
				w.t.Violate(InvTaskAnsweredByOther, "a task of %s read failed, replica_lost, through %s, though its holder %s is up", rec.tag, via.name, rec.rep.name)
			}
		default:
			// Its consumer died first (route_gone), by any path.
			w.tasks.failedGone.Add(1)
		}
	default:
		w.t.Unexpected("a task of %s read %q through %s", rec.tag, status, via.name)
	}
	return true
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// resultText is the first text content of a CallToolResult as JSON
// decoded it.
func resultText(v any) string {
	content, _ := asMap(v)["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	text, _ := asMap(content[0])["text"].(string)
	return text
}
