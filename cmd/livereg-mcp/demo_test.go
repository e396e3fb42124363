package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watcher is a client that counts the tools/list_changed it receives.
type watcher struct {
	cs      *mcp.ClientSession
	changed chan struct{}
}

func watch(t *testing.T, url string) *watcher {
	t.Helper()
	w := &watcher{changed: make(chan struct{}, 1024)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "1"}, &mcp.ClientOptions{
		Logger:                 quiet(),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { w.changed <- struct{}{} },
	})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	w.cs = cs
	return w
}

func (w *watcher) listed(t *testing.T, name string) bool {
	t.Helper()
	res, err := w.cs.ListTools(ctxGuard(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
}

// await waits for list_changed notifications until name is listed (or
// not, as want says). The server sends one after the last change of every
// burst, so the wait ends; the guard fails it otherwise.
func (w *watcher) await(t *testing.T, name string, want bool) {
	t.Helper()
	<-w.changed // at least one notification comes
	for w.listed(t, name) != want {
		select {
		case <-w.changed:
		case <-time.After(guard):
			t.Fatalf("no list_changed brought %s listed=%v", name, want)
		}
	}
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	return firstText(t, res), res.IsError
}

// Every way a consumer dies takes fortune out of the listing and tells
// connected clients; a restart takes the name over. The crash tools need
// the role admin; ops_report needs ops.
func TestDemoCrashAndRestart(t *testing.T) {
	s := startRun(t, localConfig(aliceToken+"@alice:admin,"+bobToken+"@bob:ops"))
	w := watch(t, s.url)
	alice, bob := connect(t, s.url, aliceToken), connect(t, s.url, bobToken)

	if got, isErr := callText(t, w.cs, crashName, map[string]any{"how": "stop"}); !isErr || !strings.Contains(got, "denied") {
		t.Errorf("demo_crash without a token = %q, want a denial", got)
	}
	if got, isErr := callText(t, bob, crashName, map[string]any{"how": "stop"}); !isErr || !strings.Contains(got, "role") {
		t.Errorf("demo_crash as bob (ops) = %q, want a missing-role denial", got)
	}
	if got, isErr := callText(t, alice, opsName, nil); !isErr || !strings.Contains(got, "role") {
		t.Errorf("ops_report as alice (admin) = %q, want a missing-role denial", got)
	}
	if got, isErr := callText(t, bob, opsName, nil); isErr || !strings.Contains(got, "tools") {
		t.Errorf("ops_report as bob = %q", got)
	}
	if got, isErr := callText(t, alice, restartName, nil); !isErr || !strings.Contains(got, "already running") {
		t.Errorf("demo_restart while fortune runs = %q", got)
	}
	if got, isErr := callText(t, alice, crashName, map[string]any{"how": "explode"}); !isErr || !strings.Contains(got, "explode") {
		t.Errorf("demo_crash with a bad how = %q", got)
	}

	for gen, how := range []string{"stop", "cancel", "panic", "drop"} {
		if got, isErr := callText(t, alice, crashName, map[string]any{"how": how}); isErr {
			t.Fatalf("demo_crash %s = %q", how, got)
		}
		w.await(t, victimName, false)
		if got, isErr := callText(t, w.cs, victimName, nil); !isErr {
			t.Errorf("fortune after %s answered %q", how, got)
		}
		if got, isErr := callText(t, alice, crashName, map[string]any{"how": how}); !isErr || !strings.Contains(got, "not running") {
			t.Errorf("demo_crash of a dead fortune = %q", got)
		}
		if got, isErr := callText(t, alice, restartName, nil); isErr {
			t.Fatalf("demo_restart after %s = %q", how, got)
		}
		w.await(t, victimName, true)
		want := "generation " + string(rune('2'+gen))
		if got, isErr := callText(t, w.cs, victimName, nil); isErr || !strings.HasPrefix(got, want) {
			t.Errorf("fortune after the restart = %q, want %s", got, want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for _, tt := range []struct {
		addr     net.Addr
		want     string
		wildcard bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8931}, "http://127.0.0.1:8931/mcp", false},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8931}, "http://127.0.0.1:8931/mcp", true},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8931}, "http://127.0.0.1:8931/mcp", true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8931}, "http://[::1]:8931/mcp", false},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}, "http://192.0.2.7:1/mcp", false},
	} {
		got, wildcard := endpointURL(tt.addr, "/mcp")
		if got != tt.want || wildcard != tt.wildcard {
			t.Errorf("endpointURL(%v) = %q, %v; want %q, %v", tt.addr, got, wildcard, tt.want, tt.wildcard)
		}
	}
}

// The binary (what make serve runs) exits 0 on SIGINT, a terminal's
// Ctrl-C, after its graceful shutdown, and leaves nothing listening.
func TestInterruptExitsCleanly(t *testing.T) {
	urlFile := filepath.Join(t.TempDir(), "url")
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-url-file", urlFile, "-log-level", "warn")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var url []byte
	deadline := time.Now().Add(guard)
	for {
		if b, err := os.ReadFile(urlFile); err == nil {
			url = bytes.TrimSpace(b)
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the server never wrote its URL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGINT: %v, want exit status 0", err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(string(url), "http://"), "/mcp")
	if c, err := net.Dial("tcp", host); err == nil {
		_ = c.Close()
		t.Errorf("%s still accepts connections after the exit", host)
	}
}
