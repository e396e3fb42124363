package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// holderTable is where a test says each replica is, as a fleet's view
// would: name -> whereabouts. package etcdfleet's Replica is the real
// TaskHolders; its tests run these paths over a real etcd.
type holderTable struct{ m sync.Map }

type whereabouts struct {
	endpoint string
	state    catalog.HolderState
}

func (h *holderTable) set(name, endpoint string, state catalog.HolderState) {
	h.m.Store(name, whereabouts{endpoint, state})
}

// taskPeers is a replica's Peers with TaskHolders over a holderTable: it
// stamps its tasks with its name.
type taskPeers struct {
	mcpserve.Peers
	self string
	tbl  *holderTable
}

func (p *taskPeers) Stamp() (string, bool) { return p.self, true }

func (p *taskPeers) Locate(stamp string) (string, catalog.HolderState) {
	if stamp == p.self {
		return "", catalog.HolderHere
	}
	v, ok := p.tbl.m.Load(stamp)
	if !ok {
		return "", catalog.HolderUnknown
	}
	w := v.(whereabouts)
	return w.endpoint, w.state
}

// taskReplica starts a fleet replica named name whose Peers serve tasks
// across the fleet through tbl.
func taskReplica(t testing.TB, name string, tbl *holderTable) *replica {
	return newReplica(t, func(o *mcpserve.Options) {
		o.Fleet.Peers = &taskPeers{Peers: o.Fleet.Peers, self: name, tbl: tbl}
	})
}

// taskFleet starts replicas a and b, both live in their table.
func taskFleet(t testing.TB) (tbl *holderTable, a, b *replica) {
	tbl = &holderTable{}
	a, b = taskReplica(t, "a", tbl), taskReplica(t, "b", tbl)
	tbl.set("a", a.fleet, catalog.HolderLive)
	tbl.set("b", b.fleet, catalog.HolderLive)
	return tbl, a, b
}

// startJob starts on cat a public tool that runs as a task when its
// caller takes one, and ends when release is closed or sent to.
func startJob(t testing.TB, cat *catalog.Catalog, name string, release <-chan struct{}) {
	t.Helper()
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: name, TaskSupport: catalog.TaskOptional}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				select {
				case <-release:
					return catalog.TextResult(name + " done"), nil
				case <-ctx.Done():
					return catalog.Result{}, ctx.Err()
				}
			})
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = k.Stop(ctx)
	})
}

// taskOn calls tool on url as a caller that takes tasks and returns the
// task's ID.
func taskOn(t *testing.T, url, tool, bearer string) string {
	t.Helper()
	_, res, rpcErr := taskCall(t, url, "tools/call", tool, map[string]any{"name": tool, "arguments": map[string]any{}}, true, bearer)
	id, _ := res["taskId"].(string)
	if rpcErr != nil || res["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call %s on %s: %v %v, want a CreateTaskResult", tool, url, res, rpcErr)
	}
	return id
}

func tasksOp(t *testing.T, url, method, id, bearer string) (int, map[string]any, map[string]any) {
	t.Helper()
	return taskCall(t, url, method, id, map[string]any{"taskId": id}, true, bearer)
}

// A task started through replica A on its holder B is read, cancelled
// and completed through A as through B; its ID, which names B, is checked
// before anything is forwarded: another caller's, or a tampered one, is
// unknown on every replica.
func TestTasksAcrossTheFleet(t *testing.T) {
	_, a, b := taskFleet(t)
	release := make(chan struct{})
	startJob(t, b.cat, "job", release)
	a.peers.set(string(catalog.KindTool), "job", b.fleet)

	id := taskOn(t, a.url, "job", goodToken)
	if !strings.Contains(id, ".") {
		t.Fatalf("task ID %q names no holder", id)
	}
	for _, url := range []string{a.url, b.url} {
		if _, res, rpcErr := tasksOp(t, url, "tasks/get", id, goodToken); rpcErr != nil || res["status"] != "working" || res["taskId"] != id {
			t.Fatalf("tasks/get on %s: %v %v, want it working under its own ID", url, res, rpcErr)
		}
	}
	bHits := countTasks(b.srv)
	tampered := []byte(id)
	tampered[strings.Index(id, ".")+2] ^= 1
	for _, c := range []struct{ what, id, bearer string }{
		{"another caller's", id, noRoleToken},
		{"a tampered", string(tampered), goodToken},
		// The holder's catalog ID alone names no holder: only the
		// holder knows it (and shows it to its caller alone).
		{"a local", id[:strings.Index(id, ".")], goodToken},
	} {
		for _, url := range []string{a.url, b.url} {
			if c.what == "a local" && url == b.url {
				continue
			}
			if status, _, rpcErr := tasksOp(t, url, "tasks/get", c.id, c.bearer); status != http.StatusBadRequest || rpcErr["code"] != float64(-32602) {
				t.Errorf("%s task ID on %s: HTTP %d %v, want 400 -32602", c.what, url, status, rpcErr)
			}
		}
	}
	if n := bHits.Load(); n != 0 {
		t.Errorf("%d tasks requests for IDs no replica minted for their caller reached the holder", n)
	}

	close(release)
	info := pollTask(t, a.url, id, goodToken)
	if info["status"] != "completed" || !strings.Contains(fmt.Sprint(info["result"]), "job done") {
		t.Fatalf("tasks/get through A once done: %v", info)
	}

	// Cancelled through A: the holder's task ends.
	hold := make(chan struct{})
	defer close(hold)
	startJob(t, b.cat, "long", hold)
	a.peers.set(string(catalog.KindTool), "long", b.fleet)
	id = taskOn(t, a.url, "long", goodToken)
	if _, ack, rpcErr := tasksOp(t, a.url, "tasks/cancel", id, goodToken); rpcErr != nil || ack["resultType"] != "complete" {
		t.Fatalf("tasks/cancel through A: %v %v", ack, rpcErr)
	}
	if _, res, _ := tasksOp(t, b.url, "tasks/get", id, goodToken); res["status"] != "cancelled" {
		t.Fatalf("the holder's task after a cancel through A: %v", res)
	}
}

// pollTask reads the task id on url until it is no longer working.
func pollTask(t *testing.T, url, id, bearer string) map[string]any {
	t.Helper()
	var info map[string]any
	for range 400 {
		var rpcErr map[string]any
		if _, info, rpcErr = tasksOp(t, url, "tasks/get", id, bearer); rpcErr != nil {
			t.Fatalf("tasks/get on %s: %v", url, rpcErr)
		}
		if info["status"] != "working" {
			return info
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("task still working: %v", info)
	return nil
}

// Where the view places a task's holder decides the answer of a replica
// that does not hold it: unknown, or live but unreachable, is a retryable
// CodePeerUnavailable; lost but still answering (a process that lost its
// session) is the holder's answer; lost and gone is failed, reason
// replica_lost, for good. A request forwarded here is never forwarded
// again.
func TestTaskHolderLost(t *testing.T) {
	tbl, a, b := taskFleet(t)
	release := make(chan struct{})
	close(release)
	startJob(t, b.cat, "job", release)
	a.peers.set(string(catalog.KindTool), "job", b.fleet)
	id := taskOn(t, a.url, "job", goodToken)
	if info := pollTask(t, b.url, id, goodToken); info["status"] != "completed" {
		t.Fatalf("on the holder: %v", info)
	}
	unavailable := func(what string, wantRetryable bool) {
		t.Helper()
		_, res, rpcErr := tasksOp(t, a.url, "tasks/get", id, goodToken)
		data, _ := json.Marshal(rpcErr["data"])
		if rpcErr["code"] != float64(mcpserve.CodePeerUnavailable) || strings.Contains(string(data), `"retryable":true`) != wantRetryable {
			t.Fatalf("%s: %v %v (%s), want CodePeerUnavailable, retryable %v", what, res, rpcErr, data, wantRetryable)
		}
	}

	tbl.set("b", "", catalog.HolderUnknown)
	unavailable("holder unknown yet", true)

	// Lost, yet it answers: its answer stands.
	tbl.set("b", b.fleet, catalog.HolderLost)
	if _, res, rpcErr := tasksOp(t, a.url, "tasks/get", id, goodToken); rpcErr != nil || res["status"] != "completed" {
		t.Fatalf("a lost holder that answers: %v %v, want its completed task", res, rpcErr)
	}

	// Never a second hop: B, asked by the fleet for a task it does not
	// hold, does not forward it on.
	tbl.set("b", b.fleet, catalog.HolderLive)
	idOnA := func() string {
		startJob(t, a.cat, "job-a", release)
		return taskOn(t, a.url, "job-a", goodToken)
	}()
	aHits := countTasks(a.srv)
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, b.fleet, strings.NewReader(tasksGetBody(idOnA)))
	require.NoError(t, err)
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Livereg-Fleet-Hop": {"1"},
		"Mcp-Protocol-Version": {mcpserve.ProtocolStateless}, "Mcp-Method": {"tasks/get"}, "Mcp-Name": {idOnA}}
	resp, err := http.DefaultClient.Do(signed(t, req, b.fleet, nil))
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	status, body := resp.StatusCode, string(raw)
	if !strings.Contains(body, fmt.Sprint(mcpserve.CodePeerUnavailable)) || aHits.Load() != 0 {
		t.Fatalf("a forwarded tasks/get for another holder's task: HTTP %d %s, %d requests reached that holder; want CodePeerUnavailable and none", status, body, aHits.Load())
	}

	// B crashes: while its lease stands, retryable; once lost, failed.
	b.shut()
	unavailable("holder live but down", true)
	tbl.set("b", b.fleet, catalog.HolderLost)
	_, res, rpcErr := tasksOp(t, a.url, "tasks/get", id, goodToken)
	e, _ := res["error"].(map[string]any)
	if rpcErr != nil || res["status"] != "failed" || res["taskId"] != id || !strings.Contains(fmt.Sprint(e["data"]), "replica_lost") || res["createdAt"] == nil {
		t.Fatalf("a lost holder's task: %v %v, want it failed, replica_lost", res, rpcErr)
	}
	for _, m := range []string{"tasks/cancel", "tasks/update"} {
		if _, ack, rpcErr := taskCall(t, a.url, m, id, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true, goodToken); rpcErr != nil || ack["resultType"] != "complete" {
			t.Errorf("%s of a lost holder's task: %v %v, want it acknowledged as for any ended task", m, ack, rpcErr)
		}
	}
	if status, _, rpcErr := tasksOp(t, a.url, "tasks/get", id, noRoleToken); status != http.StatusBadRequest || rpcErr["code"] != float64(-32602) {
		t.Errorf("another caller's tasks/get of a lost holder's task: HTTP %d %v, want unknown", status, rpcErr)
	}
}

func tasksGetBody(id string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": map[string]any{"taskId": id,
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
		}}})
	return string(b)
}

// countTasks counts the tasks requests other replicas forward to srv.
func countTasks(srv *mcpserve.Server) *atomic.Int64 {
	var n atomic.Int64
	mcpserve.OnForwarded(srv, func(method string) {
		if strings.HasPrefix(method, "tasks/") {
			n.Add(1)
		}
	})
	return &n
}

// A listen stream hears a task only on the replica that holds it: there
// the task's fleet ID is acknowledged and its changes are sent under that
// ID; another replica leaves it out of the acknowledgement (its client
// polls).
func TestTaskListenAcrossTheFleet(t *testing.T) {
	_, a, b := taskFleet(t)
	release := make(chan struct{})
	startJob(t, b.cat, "job", release)
	a.peers.set(string(catalog.KindTool), "job", b.fleet)
	id := taskOn(t, a.url, "job", goodToken)

	elsewhere := openListen(t, a.url, goodToken, map[string]any{"taskIds": []string{id}}, true)
	if ids := elsewhere.acked(t); len(ids) != 0 {
		t.Fatalf("a replica that does not hold the task acknowledged %v", ids)
	}
	ls := openListen(t, b.url, goodToken, map[string]any{"taskIds": []string{id}}, true)
	if ids := ls.acked(t); len(ids) != 1 || ids[0] != id {
		t.Fatalf("the holder acknowledged %v, want the task's fleet ID", ids)
	}
	if got := taskStatus(t, ls.next(t, "the task as it reads"), id); got != "working" {
		t.Fatalf("first notification: %s, want working", got)
	}
	close(release)
	if got := taskStatus(t, ls.next(t, "the task's end"), id); got != "completed" {
		t.Fatalf("then: %s, want completed", got)
	}
}
