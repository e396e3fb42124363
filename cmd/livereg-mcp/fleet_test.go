package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

const testFleetToken = "fleet-secret-0123456789"

func TestFleetFlags(t *testing.T) {
	env := func(token string) func(string) string {
		return func(k string) string {
			if k == fleetTokenEnv {
				return token
			}
			return ""
		}
	}
	withToken, noToken := env(testFleetToken), env("")
	for _, tt := range []struct {
		args    []string
		getenv  func(string) string
		wantErr string // "" for success
	}{
		{[]string{}, withToken, ""}, // the variable alone joins nothing
		{[]string{"-etcd", "http://127.0.0.1:2379"}, withToken, ""},
		{[]string{"-etcd", "http://10.0.0.1:2379, https://10.0.0.2:2379,unix:///run/etcd.sock"}, withToken, ""},
		{[]string{"-etcd-embedded", "d", "-etcd-listen", "http://127.0.0.1:0"}, withToken, ""},
		{[]string{"-etcd-embedded", "d", "-etcd-listen", "http://[::1]:2379"}, withToken, ""},
		{[]string{"-etcd", "http://e:2379", "-fleet-token", testFleetToken, "-fleet-ttl", "2s", "-fleet-prefix", "/a/b",
			"-replica", "r-1.x", "-advertise", "https://10.0.0.5:8931/fleet"}, noToken, ""},

		{[]string{"-etcd", "http://e:2379", "-etcd-embedded", "d"}, withToken, "mutually exclusive"},
		{[]string{"-advertise", "http://h:1/fleet"}, withToken, "-advertise needs -etcd or -etcd-embedded"},
		{[]string{"-fleet-token", testFleetToken}, withToken, "-fleet-token needs -etcd"},
		{[]string{"-fleet-ttl", "3s"}, withToken, "-fleet-ttl needs -etcd"},
		{[]string{"-replica", "r1"}, withToken, "-replica needs -etcd"},
		{[]string{"-fleet-prefix", "/p"}, withToken, "-fleet-prefix needs -etcd"},
		{[]string{"-etcd-listen", "http://127.0.0.1:0"}, withToken, "-etcd-listen needs -etcd or -etcd-embedded"},
		{[]string{"-etcd", "http://e:2379", "-etcd-listen", "http://127.0.0.1:0"}, withToken, "-etcd-listen needs -etcd-embedded"},
		{[]string{"-etcd", "http://e:2379", "-stdio"}, withToken, "-stdio cannot join a fleet"},
		{[]string{"-etcd", "http://e:2379", "-path", "/fleet"}, withToken, "-path /fleet"},
		{[]string{"-etcd", "http://e:2379"}, noToken, "needs the fleet token"},
		{[]string{"-etcd", "http://e:2379", "-fleet-token", "short-token"}, noToken, "shorter than 16 bytes"},
		{[]string{"-etcd", "http://e:2379"}, env("has a space in it, long enough"), "not a bearer token"},
		{[]string{"-etcd", "http://e:2379", "-fleet-ttl", "1500ms"}, withToken, "whole number of seconds"},
		{[]string{"-etcd", "http://e:2379", "-fleet-ttl", "0s"}, withToken, "whole number of seconds"},
		{[]string{"-etcd", "http://e:2379", "-fleet-prefix", "p"}, withToken, "-fleet-prefix must begin"},
		{[]string{"-etcd", "http://e:2379", "-fleet-prefix", "/p/"}, withToken, "-fleet-prefix must begin"},
		{[]string{"-etcd", "http://e:2379", "-replica", "has space"}, withToken, "-replica must be"},
		{[]string{"-etcd", "http://e:2379", "-replica", strings.Repeat("r", maxReplicaName+1)}, withToken, "-replica must be"},
		{[]string{"-etcd", "http://e:2379", "-advertise", "10.0.0.5:8931"}, withToken, "-advertise must be"},
		{[]string{"-etcd", "http://e:2379", "-advertise", "http://h:1"}, withToken, "-advertise must be"},
		{[]string{"-etcd", "e:2379"}, withToken, "-etcd takes"},
		{[]string{"-etcd", "http://e:2379,"}, withToken, "-etcd takes"},
		{[]string{"-etcd", "http://e"}, withToken, "-etcd takes"},
		{[]string{"-etcd-embedded", "d", "-etcd-listen", "http://0.0.0.0:2379"}, withToken, "loopback"},
		{[]string{"-etcd-embedded", "d", "-etcd-listen", "http://localhost:2379"}, withToken, "loopback"},
		{[]string{"-etcd-embedded", "d", "-etcd-listen", "https://127.0.0.1:2379"}, withToken, "loopback"},
	} {
		cfg, err := parseArgs(tt.args, tt.getenv, io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tt.args, err, tt.wantErr)
		case err != nil && strings.Contains(err.Error(), testFleetToken):
			t.Errorf("%q: the error quotes the fleet token: %v", tt.args, err)
		case err == nil && cfg.joins() && (cfg.fleetToken != testFleetToken || cfg.replica == "" || cfg.fleetPrefix == ""):
			t.Errorf("%q: parsed %+v", tt.args, cfg)
		}
	}
	cfg, err := parseArgs([]string{"-etcd", "http://e:2379"}, withToken, io.Discard)
	if err != nil || cfg.fleetTTL != 5*time.Second || cfg.fleetPrefix != defaultFleetPrefix || cfg.fleetTokenOnCmdline ||
		cfg.etcdListen != defaultEtcdListen || !strings.HasSuffix(cfg.replica, "-"+strconv.Itoa(os.Getpid())) {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

// A bad flag combination exits 2, as the other bad flags do.
func TestFleetFlagsExit2(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-etcd", "http://127.0.0.1:1", "-etcd-embedded", t.TempDir())
	cmd.Env = append(os.Environ(), runMainEnv+"=1", fleetTokenEnv+"="+testFleetToken)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "mutually exclusive") {
		t.Errorf("exit %v, output %q; want exit status 2 and the reason", err, out)
	}
}

// replicaProc is a livereg-mcp process of the test's fleet.
type replicaProc struct {
	name    string
	cmd     *exec.Cmd
	url     string // its MCP endpoint
	etcd    string // with -etcd-embedded, the etcd's client URL
	logFile string
	exited  chan struct{}
}

// startReplica runs the test binary as livereg-mcp, replica name, with the
// fleet token and alice's token in its environment, and waits until it
// serves.
func startReplica(t *testing.T, dir, name string, args ...string) *replicaProc {
	t.Helper()
	p := &replicaProc{name: name, logFile: filepath.Join(dir, name+".log"), exited: make(chan struct{})}
	urlFile := filepath.Join(dir, name+".url")
	args = append([]string{"-addr", "127.0.0.1:0", "-replica", name, "-fleet-ttl", "1s", "-url-file", urlFile, "-log-json"}, args...)
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1", fleetTokenEnv+"="+testFleetToken, tokensEnv+"="+aliceToken+"@alice:admin")
	logw, err := os.Create(p.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	p.cmd.Stderr = logw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.stop(t) })
	deadline := time.Now().Add(guard)
	for {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			p.url = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("replica %s exited before serving: %s", name, p.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not serving after %v: %s", name, guard, p.logTail())
		}
	}
	p.etcd = p.logField("client_url")
	return p
}

// stop ends the replica with SIGTERM and checks that it shut down cleanly;
// a replica killed already is only waited for.
func (p *replicaProc) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			t.Errorf("replica %s: %v after SIGTERM, want exit 0: %s", p.name, p.cmd.ProcessState, p.logTail())
		}
	case <-time.After(guard):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("replica %s did not stop within %v of SIGTERM", p.name, guard)
	}
}

func (p *replicaProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// logField returns the first value of a field of the replica's JSON log.
func (p *replicaProc) logField(key string) string {
	f, err := os.Open(p.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			if v, ok := rec[key].(string); ok {
				return v
			}
		}
	}
	return ""
}

func (p *replicaProc) logMessages() []string {
	b, _ := os.ReadFile(p.logFile)
	var msgs []string
	for line := range strings.Lines(string(b)) {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil {
			msgs = append(msgs, rec.Msg)
		}
	}
	return msgs
}

// logAttr returns attribute attr of each log record with message msg.
func (p *replicaProc) logAttr(msg, attr string) []string {
	b, _ := os.ReadFile(p.logFile)
	var out []string
	for line := range strings.Lines(string(b)) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			v, _ := rec[attr].(string)
			out = append(out, v)
		}
	}
	return out
}

func (p *replicaProc) logTail() string {
	b, _ := os.ReadFile(p.logFile)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// toolNames lists the tools cs sees.
func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// eventually polls cond every 20 ms until it holds, or fails after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// Three replicas: one with an embedded etcd, two joining it. A client of
// replica 1 lists and calls what a consumer on replica 3 serves; a
// replica's fleet endpoint refuses requests without the fleet token; a
// killed replica's tool fails with a retryable error, never "unknown
// tool" and never a hang, and leaves the listing once its lease expires;
// a demo route whose consumer dies is taken over by another replica.
func TestFleetOfThree(t *testing.T) {
	dir := t.TempDir()
	r1 := startReplica(t, dir, "r1", "-etcd-embedded", filepath.Join(dir, "etcd"), "-etcd-listen", "http://127.0.0.1:0")
	if r1.etcd == "" || !strings.HasPrefix(r1.etcd, "http://127.0.0.1:") {
		t.Fatalf("replica 1 did not log its etcd's client URL: %s", r1.logTail())
	}
	r2 := startReplica(t, dir, "r2", "-etcd", r1.etcd, "-stateless")
	r3 := startReplica(t, dir, "r3", "-etcd", r1.etcd)
	for _, r := range []*replicaProc{r1, r2, r3} {
		if got := r.logField("advertise"); got != strings.TrimSuffix(r.url, "/mcp")+mcpserve.DefaultFleetPath {
			t.Errorf("%s advertises %q, serves %s", r.name, got, r.url)
		}
	}
	ctx := ctxGuard(t)
	alice := connect(t, r1.url, aliceToken)

	// Listing and calling a route of replica 3 on replica 1.
	eventually(t, 5*time.Second, "replica 1 lists replica_r2 and replica_r3", func() bool {
		names := toolNames(t, ctx, alice)
		return slices.Contains(names, "replica_r2") && slices.Contains(names, "replica_r3")
	})
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "replica_r3"})
	if err != nil || res.IsError || !strings.HasPrefix(firstText(t, res), "replica r3 served this call") {
		t.Fatalf("replica_r3 on replica 1 = %+v, %v", res, err)
	}
	// The same from a client of replica 2, which serves without sessions,
	// and for a route that replica 1 holds.
	anon2 := connect(t, r2.url, "")
	for _, c := range []struct{ tool, want string }{{"replica_r3", "replica r3 served this call"}, {"echo", "from r2"}} {
		res, err := anon2.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": "from r2"}})
		if err != nil || res.IsError || !strings.HasPrefix(firstText(t, res), c.want) {
			t.Errorf("%s on replica 2 = %+v, %v", c.tool, res, err)
		}
	}
	_ = anon2.Close()
	// The demo routes that replicas 2 and 3 lost to replica 1 failed
	// nothing, and were reported once.
	for _, r := range []*replicaProc{r2, r3} {
		if n := count(r.logMessages(), "another replica serves these demo routes; this one takes each over when it is free"); n != 1 {
			t.Errorf("%s logged the demo routes it lost %d times, want once: %s", r.name, n, r.logTail())
		}
	}

	// The fleet endpoint answers requests signed by an enrolled replica
	// alone: no bearer token opens it, the fleet token included, which
	// never crosses the hop.
	fleetURL := strings.TrimSuffix(r3.url, "/mcp") + mcpserve.DefaultFleetPath
	for _, tt := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer " + aliceToken, http.StatusUnauthorized},
		{"Bearer " + testFleetToken + "x", http.StatusUnauthorized},
		{"Bearer " + testFleetToken, http.StatusUnauthorized},
	} {
		if got := postFleet(t, ctx, fleetURL, tt.auth); got != tt.want {
			t.Errorf("POST %s with %q: HTTP %d, want %d", mcpserve.DefaultFleetPath, tt.auth, got, tt.want)
		}
	}

	// fortune's consumer dies on replica 1; another replica takes the name
	// over, and replica 1 forwards the calls to it.
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: crashName, Arguments: map[string]any{"how": "stop"}})
	if err != nil || res.IsError {
		t.Fatalf("demo_crash = %+v, %v", res, err)
	}
	took := eventually(t, 30*time.Second, "another replica serves fortune", func() bool {
		res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: victimName})
		return err == nil && !res.IsError && strings.Contains(firstText(t, res), "generation 1 says")
	})
	t.Logf("fortune served again, by another replica, %v after its consumer's death", took.Round(time.Millisecond))
	var after []string
	for _, r := range []*replicaProc{r2, r3} {
		after = append(after, r.logAttr("took a demo route over", "after")...)
	}
	// The view's change, not the periodic retry, set the takeover off.
	if len(after) != 1 || after[0] != wokeChange {
		t.Errorf("takeovers after %q, want one, after %q", after, wokeChange)
	}

	// Replica 3 crashes: its tool fails at once, retryably, then leaves
	// the listing when its lease expires.
	r3.kill(t)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = alice.CallTool(cctx, &mcp.CallToolParams{Name: "replica_r3"})
	elapsed := time.Since(start)
	var we *jsonrpc.Error
	switch {
	case !errors.As(err, &we):
		t.Errorf("replica_r3 after replica 3 died = %v, want a JSON-RPC error", err)
	case elapsed > 5*time.Second:
		t.Errorf("replica_r3 after replica 3 died took %v", elapsed)
	case strings.Contains(we.Message, "unknown tool"):
		t.Errorf("replica_r3 after replica 3 died = %v: unknown tool while it is listed", we)
	default:
		var data struct {
			Reason    string
			Retryable bool
		}
		_ = json.Unmarshal(we.Data, &data)
		ok := we.Code == mcpserve.CodePeerUnavailable && data.Reason == "peer_unavailable" ||
			we.Code == jsonrpc.CodeInvalidParams && data.Reason == "route_gone"
		if !ok || !data.Retryable {
			t.Errorf("replica_r3 after replica 3 died = code %d %q data %s; want retryable peer_unavailable or route_gone", we.Code, we.Message, we.Data)
		}
	}
	gone := eventually(t, 5*time.Second, "replica_r3 leaves replica 1's listing", func() bool {
		return !slices.Contains(toolNames(t, ctx, alice), "replica_r3")
	})
	t.Logf("replica 3's tool left the listing %v after its crash (TTL 1s)", (gone + elapsed).Round(time.Millisecond))
	if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "replica_r2"}); err != nil {
		t.Errorf("replica_r2 after replica 3 died: %v", err)
	}
	_ = alice.Close()

	// A clean stop: the replica leaves the fleet, the embedded etcd last.
	r2.stop(t)
	r1.stop(t)
	msgs := r1.logMessages()
	if i, j := slices.Index(msgs, "left the fleet"), slices.Index(msgs, "embedded etcd stopped"); i < 0 || j < i {
		t.Errorf("replica 1's shutdown: %q", msgs)
	}
	// The consumers the replica's Close kills are not mourned, nor started
	// again.
	for _, r := range []*replicaProc{r1, r2} {
		if n := count(r.logMessages(), "a demo route's consumer died; it starts again once its name is free"); n > 0 {
			t.Errorf("%s logged %d deaths at its shutdown", r.name, n)
		}
	}
}

func count(msgs []string, msg string) int {
	n := 0
	for _, m := range msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// postFleet posts a server/discover request of the current revision to a
// fleet endpoint with the Authorization header auth, and returns the HTTP
// status.
func postFleet(t *testing.T, ctx context.Context, url, auth string) int {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcpserve.ProtocolStateless + `","io.modelcontextprotocol/clientCapabilities":{}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpserve.ProtocolStateless)
	req.Header.Set("Mcp-Method", "server/discover")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
