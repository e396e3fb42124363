package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// swappable is an authenticator whose tokens a test changes under the
// server: a token expires or is revoked between two requests.
type swappable struct {
	mu     sync.Mutex
	tokens map[string]bindsec.Principal
}

func (a *swappable) Authenticate(_ context.Context, cred string) (bindsec.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pr, ok := a.tokens[cred]; ok {
		return pr, nil
	}
	return bindsec.Principal{}, bindsec.ErrUnauthenticated
}

func (a *swappable) set(cred string, pr bindsec.Principal, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok {
		a.tokens[cred] = pr
	} else {
		delete(a.tokens, cred)
	}
}

// heldJob starts a task tool under plan whose tasks work until the test
// ends.
func heldJob(t *testing.T, cat *catalog.Catalog, plan bindsec.Plan) {
	t.Helper()
	release := make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "job", TaskSupport: catalog.TaskOptional}, plan,
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return c.Detach(ctx, func(ctx context.Context) (catalog.Result, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return catalog.TextResult("done"), nil
			})
		})
	require.NoError(t, err)
	t.Cleanup(func() { close(release); _ = k.Stop(context.Background()) })
}

// startTaskJob starts a task of "job" as bearer and returns its ID, or the
// JSON-RPC error.
func startTaskJob(t *testing.T, url, bearer string) (string, map[string]any) {
	t.Helper()
	_, res, rpcErr := taskCall(t, url, "tools/call", "job", map[string]any{"name": "job", "arguments": map[string]any{}}, true, bearer)
	id, _ := res["taskId"].(string)
	return id, rpcErr
}

// On a public task tool a made-up bearer token is no principal: all of
// one address's tokens share one share of the task caps, and a real
// principal is still served beside them. A refused start holds nothing.
func TestMadeUpTokensShareOneTaskShare(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{goodToken: bindsec.NewPrincipal("alice", "admin")})
			// 200 tasks in all, 50 per share, 100 for the anonymous.
			cat := newCatalog(t, catalog.Config{Authenticator: auth, MaxTasks: 200, MaxTasksPerCaller: 50})
			heldJob(t, cat, bindsec.Plan{Public: true})
			url := newFixture(t, cat, mcpserve.Options{Stateless: stateless}).http.URL

			started := 0
			for i := range 100 {
				for range 2 {
					before := cat.Stats().Tasks.Held
					id, rpcErr := startTaskJob(t, url, fmt.Sprintf("made-up-%d", i))
					if id != "" {
						started++
						continue
					}
					require.Equal(t, float64(-32029), rpcErr["code"], "a start over the share: %v", rpcErr)
					require.Equal(t, before, cat.Stats().Tasks.Held, "a refused start holds nothing")
				}
			}
			assert.Equal(t, 50, started, "the made-up tokens of one address share one share")
			for i := range 50 {
				id, rpcErr := startTaskJob(t, url, goodToken)
				require.NotEmpty(t, id, "alice's start %d: %v", i, rpcErr)
			}
		})
	}
}

// Each tasks/get, tasks/update and tasks/cancel authenticates its
// credential again: once the token that started a task has expired or
// been revoked, it reads nothing and cancels nothing, answered as an
// unauthenticated request is; the task goes on, and the same token, once
// valid again, still sees it.
func TestTasksReauthenticate(t *testing.T) {
	auth := &swappable{tokens: map[string]bindsec.Principal{}}
	admin := bindsec.NewPrincipal("alice", "admin")
	auth.set(goodToken, admin.WithExpires(time.Now().Add(time.Hour)), true)
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	heldJob(t, cat, bindsec.Plan{Roles: []string{"admin"}})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL

	id, rpcErr := startTaskJob(t, url, goodToken)
	require.NotEmpty(t, id, "%v", rpcErr)
	get := func() (int, string) {
		return postTasks(t, url, "tasks/get", id, map[string]any{"taskId": id}, http.Header{"Authorization": {"Bearer " + goodToken}})
	}
	status, body := get()
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"status":"working"`)

	// What an unauthenticated request gets where a credential is
	// required.
	strict := newFixture(t, cat, mcpserve.Options{Stateless: true, RequireCredential: mcpserve.CredentialAlways}).http.URL
	wantStatus, wantBody := postTasks(t, strict, "tools/list", "", map[string]any{}, nil)
	require.Equal(t, http.StatusUnauthorized, wantStatus)

	for _, tc := range []struct {
		name  string
		spoil func()
	}{
		{"expired", func() { auth.set(goodToken, admin.WithExpires(time.Now().Add(-time.Second)), true) }},
		{"revoked", func() { auth.set(goodToken, bindsec.Principal{}, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spoil()
			for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
				status, body := postTasks(t, url, method, id, map[string]any{"taskId": id, "inputResponses": map[string]any{}},
					http.Header{"Authorization": {"Bearer " + goodToken}})
				assert.Equal(t, wantStatus, status, "%s: %s", method, body)
				assert.Equal(t, wantBody, body, method)
			}
			auth.set(goodToken, admin.WithExpires(time.Now().Add(time.Hour)), true)
			status, body := get()
			require.Equal(t, http.StatusOK, status, body)
			assert.Contains(t, body, `"status":"working"`, "the refused cancel changed nothing")
		})
	}
}

// tasks/* pass the front's checks as every other method does: a bad Host,
// Content-Type or Accept gets what tools/list gets, and the task is
// untouched.
func TestTasksPassTheFrontsChecks(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	heldJob(t, cat, bindsec.Plan{Public: true})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL
	id, rpcErr := startTaskJob(t, url, "alice")
	require.NotEmpty(t, id, "%v", rpcErr)
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"Host", http.Header{"Host": {"evil.example"}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"Content-Type", http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType},
		{"Accept", http.Header{"Accept": {"application/json"}}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listStatus, _ := postTasks(t, url, "tools/list", "", map[string]any{}, tc.h)
			require.Equal(t, tc.want, listStatus, "tools/list")
			for _, method := range []string{"tasks/cancel", "tasks/get", "tasks/update"} {
				h := tc.h.Clone()
				h.Set("Authorization", "Bearer alice")
				status, body := postTasks(t, url, method, id, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, h)
				assert.Equal(t, listStatus, status, "%s: %s", method, body)
			}
			info, err := cat.GetTask(id, "alice")
			require.NoError(t, err)
			assert.Equal(t, catalog.TaskWorking, info.Status, "a refused tasks/cancel changed nothing")
		})
	}
}

// postTasks posts one 2026-07-28 request with the tasks extension, its
// headers overridden by h (Host included), and returns the status and
// body.
func postTasks(t *testing.T, url, method, name string, params map[string]any, h http.Header) (int, string) {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpserve.ProtocolStateless,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "test", "version": "1"},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctxGuard(t), http.MethodPost, url, strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	for k, vs := range h {
		if k == "Host" {
			req.Host = vs[0]
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(got)
}

// A task whose body runs past catalog.Config.MaxTaskLifetime reads
// failed on the wire, with the reason task_lifetime.
func TestTaskLifetimeOnTheWire(t *testing.T) {
	cat := newCatalog(t, catalog.Config{MaxTaskLifetime: time.Nanosecond})
	heldJob(t, cat, bindsec.Plan{Public: true})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL
	id, rpcErr := startTaskJob(t, url, "alice")
	require.NotEmpty(t, id, "%v", rpcErr)
	tk, err := cat.GetTask(id, "alice")
	require.NoError(t, err)
	// The bound is a nanosecond: the task ends at once; its end is
	// awaited, not timed.
	for !tk.Terminal() {
		runtime.Gosched()
		tk, err = cat.GetTask(id, "alice")
		require.NoError(t, err)
	}
	_, res, rpcErr := taskCall(t, url, "tasks/get", id, map[string]any{"taskId": id}, true, "alice")
	require.Nil(t, rpcErr)
	assert.Equal(t, "failed", res["status"])
	taskErr, _ := res["error"].(map[string]any)
	require.NotNil(t, taskErr, "%v", res)
	assert.Contains(t, taskErr["message"], "MaxTaskLifetime")
	assert.Equal(t, map[string]any{"reason": "task_lifetime", "retryable": false}, taskErr["data"])
}

// A tasks request for a task another replica holds is authenticated
// again by the replica the caller reached, before it crosses the hop (the
// holder never gets the token: it judges the principal that replica
// asserts, until the assertion expires): a credential revoked there reads
// and cancels nothing on the holder.
func TestForwardedTasksReauthenticate(t *testing.T) {
	frontAuth := &swappable{tokens: map[string]bindsec.Principal{goodToken: bindsec.NewPrincipal("alice", "reader")}}
	tbl := &holderTable{}
	withPeers := func(name string) func(*mcpserve.Options) {
		return func(o *mcpserve.Options) { o.Fleet.Peers = &taskPeers{Peers: o.Fleet.Peers, self: name, tbl: tbl} }
	}
	a := newReplicaOf(t, catalog.Config{Authenticator: frontAuth}, withPeers("a"))
	b := newReplicaOf(t, catalog.Config{Authenticator: fleetAuth}, withPeers("b"))
	tbl.set("a", a.fleet, catalog.HolderLive)
	tbl.set("b", b.fleet, catalog.HolderLive)
	release := make(chan struct{})
	defer close(release)
	startJob(t, b.cat, "job", release)
	a.peers.set(string(catalog.KindTool), "job", b.fleet)
	id := taskOn(t, a.url, "job", goodToken)

	_, res, rpcErr := tasksOp(t, a.url, "tasks/get", id, goodToken)
	require.Nil(t, rpcErr)
	require.Equal(t, "working", res["status"])

	frontAuth.set(goodToken, bindsec.Principal{}, false)
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		status, body := postTasks(t, a.url, method, id, map[string]any{"taskId": id}, http.Header{"Authorization": {"Bearer " + goodToken}})
		assert.Equal(t, http.StatusUnauthorized, status, "%s through a: %s", method, body)
	}
	frontAuth.set(goodToken, bindsec.NewPrincipal("alice", "reader"), true)
	_, res, rpcErr = tasksOp(t, a.url, "tasks/get", id, goodToken)
	require.Nil(t, rpcErr)
	assert.Equal(t, "working", res["status"], "the refused cancel changed nothing")
}

// A subscriptions/listen that names tasks judges its credential as
// tasks/get does: once revoked, the credential that started a task is
// acknowledged none of it, and hears nothing of it.
func TestTaskListenReauthenticates(t *testing.T) {
	auth := &swappable{tokens: map[string]bindsec.Principal{goodToken: bindsec.NewPrincipal("alice", "reader")}}
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	heldJob(t, cat, bindsec.Plan{Public: true})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL
	id, rpcErr := startTaskJob(t, url, goodToken)
	require.NotEmpty(t, id, "%v", rpcErr)

	auth.set(goodToken, bindsec.Principal{}, false)
	ls := openListen(t, url, goodToken, map[string]any{"taskIds": []string{id}}, true)
	assert.Empty(t, ls.acked(t), "a revoked credential's listen")
	ls.ended(t, "a listen with nothing agreed")

	auth.set(goodToken, bindsec.NewPrincipal("alice", "reader"), true)
	ls = openListen(t, url, goodToken, map[string]any{"taskIds": []string{id}}, true)
	assert.Equal(t, []string{id}, ls.acked(t), "once valid again")
}

// A listen stream stops watching its tasks when its credential expires:
// judged when it opens and at that expiry, it hears nothing after, and
// ends.
func TestTaskListenEndsAtExpiry(t *testing.T) {
	fire := make(chan time.Time)
	asked := make(chan time.Duration, 1)
	defer mcpserve.SetListenExpiry(func(d time.Duration) (<-chan time.Time, func() bool) {
		asked <- d
		return fire, func() bool { return true }
	})()
	auth := &swappable{tokens: map[string]bindsec.Principal{
		goodToken: bindsec.NewPrincipal("alice", "reader").WithExpires(time.Now().Add(time.Hour)),
	}}
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	heldJob(t, cat, bindsec.Plan{Public: true})
	url := newFixture(t, cat, mcpserve.Options{Stateless: true}).http.URL
	id, rpcErr := startTaskJob(t, url, goodToken)
	require.NotEmpty(t, id, "%v", rpcErr)

	ls := openListen(t, url, goodToken, map[string]any{"taskIds": []string{id}}, true)
	require.Equal(t, []string{id}, ls.acked(t))
	assert.Equal(t, "working", taskStatus(t, ls.next(t, "the task as it stands"), id))
	select {
	case d := <-asked:
		assert.InDelta(t, time.Hour, d, float64(time.Minute), "the timer is set at the principal's expiry")
	default:
		// The watcher sent the task's state after it set its timer.
		t.Error("the listen set no timer at its credential's expiry")
	}
	close(fire) // the credential expires
	ls.ended(t, "a listen whose credential expired")
}
