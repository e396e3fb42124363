package mcpserve_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// TestFastPathSessionsLeaveToSDK: a session's request goes to the SDK
// when the fast path cannot serve it as the SDK's session would: before
// notifications/initialized, on a session whose client takes sampling (a
// body may ask it something over the session), with a protocol header
// other than the session's, or none; and an unknown session is 404 alike.
func TestFastPathSessionsLeaveToSDK(t *testing.T) {
	echo := fastCase{"echo", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}}, "", true}
	initialized := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	tests := []struct {
		name    string
		mode    pathsMode
		version string
		session string // overrides the session's ID
	}{
		{"not initialized", pathsMode{name: "uninitialized", stateful: true, caps: `{}`}, "2025-11-25", ""},
		{"a client that samples", pathsMode{name: "sampling", stateful: true, caps: `{"sampling":{}}`, setup: []string{initialized}}, "2025-11-25", ""},
		{"a client that elicits", pathsMode{name: "eliciting", stateful: true, caps: `{"elicitation":{}}`, setup: []string{initialized}}, "2025-11-25", ""},
		{"another revision in the header", sessionMode, "2025-06-18", ""},
		{"no revision in the header", sessionMode, "", ""},
		{"an unknown session", sessionMode, "2025-11-25", "nosuchsession"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTwoPaths(t, tt.mode)
			ex := echo.exchange("2025-11-25", 1)
			ex.headers["MCP-Protocol-Version"] = tt.version
			if tt.session != "" {
				ex.headers["Mcp-Session-Id"] = tt.session
			}
			fast := p.send(t, p.fast.URL, ex)
			if n := p.takenCount("tools/call"); n != 0 {
				t.Errorf("the fast path served %d calls", n)
			}
			compareAnswers(t, ex, fast, p.send(t, p.sdk.URL, ex))
		})
	}
}

// openSessionAt initializes a session at url and returns its ID.
func openSessionAt(t *testing.T, url string) string {
	t.Helper()
	code, id := rawPost(t, url, initializeBody, nil)
	if code != http.StatusOK || id == "" {
		t.Fatalf("initialize = %d, session %q", code, id)
	}
	if code, _ := rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, sessionHeaders(id)); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized = %d", code)
	}
	return id
}

// awaitFastPath waits until the fast path takes the session's requests:
// the SDK answers notifications/initialized before it handles it.
func awaitFastPath(t *testing.T, srv *mcpserve.Server, id string) {
	t.Helper()
	waitUntil(t, "the session to reach the fast path", func() bool { return mcpserve.OnFastPath(srv, id) })
}

func sessionHeaders(id string) map[string][]string {
	return map[string][]string{"Mcp-Session-Id": {id}, "Mcp-Protocol-Version": {"2025-11-25"}}
}

// holdTool starts a tool "hold" whose body signals entered, then waits
// for its context to end or for release, and reports its context's end
// on ended.
func holdTool(t *testing.T, cat *catalog.Catalog) (entered chan struct{}, release chan struct{}, ended chan error) {
	t.Helper()
	entered, release, ended = make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "hold"}, bindsec.Plan{Public: true},
		func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			select {
			case <-ctx.Done():
				ended <- context.Cause(ctx)
			case <-release:
				ended <- nil
			}
			return catalog.TextResult("held"), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return entered, release, ended
}

const holdCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hold","arguments":{}}}`

// TestFastPathCancelledByClient: a notifications/cancelled for a call in
// flight ends its body's context, on the fast path as over the SDK's,
// while the request that carries the call is still open.
func TestFastPathCancelledByClient(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast", false: "sdk"}[fast], func(t *testing.T) {
			cat := newCatalog(t, catalog.Config{})
			entered, release, ended := holdTool(t, cat)
			defer close(release)
			srv := newServer(t, cat, mcpserve.Options{})
			if !fast {
				mcpserve.NoFastPath(srv)
			}
			var served atomic.Int64
			t.Cleanup(mcpserve.SetFastHook(func(string) { served.Add(1) }))
			url := serve(t, srv, false)
			id := openSessionAt(t, url)
			if fast {
				awaitFastPath(t, srv, id)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp := rawPostResponse(t, url, holdCall, sessionHeaders(id))
				resp.Body.Close()
			}()
			wait(t, entered, "the body to start")
			if code, _ := rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, sessionHeaders(id)); code != http.StatusAccepted {
				t.Fatalf("notifications/cancelled = %d", code)
			}
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the body's context ended with %v, want context.Canceled", err)
				}
			case <-time.After(eventGuard):
				t.Fatal("the body's context did not end")
			}
			<-done
			if n := served.Load(); fast && n != 1 {
				t.Errorf("the fast path served %d calls, want 1", n)
			}
		})
	}
}

// TestFastPathKeepsSessionAlive: a session whose only request in flight
// is one the fast path serves is not idle: it outlives its timeout many
// times over, and times out once the call has ended. (The SDK's own
// timer, which never sees that request, would close it.)
func TestFastPathKeepsSessionAlive(t *testing.T) {
	const timeout = 20 * time.Millisecond
	cat := newCatalog(t, catalog.Config{})
	entered, release, ended := holdTool(t, cat)
	srv := newServer(t, cat, mcpserve.Options{SessionTimeout: timeout})
	url := serve(t, srv, false)
	id := openSessionAt(t, url)
	awaitFastPath(t, srv, id)
	done := postHeld(t, url, id)
	wait(t, entered, "the body to start")
	time.Sleep(10 * timeout)
	if held := srv.Stats().Sessions.Held; held != 1 {
		t.Fatalf("%d sessions held while a call was in flight on one, want 1", held)
	}
	close(release)
	if err := <-ended; err != nil {
		t.Errorf("the body's context ended: %v", err)
	}
	if code := <-done; code != http.StatusOK {
		t.Errorf("the held call = %d", code)
	}
	waitUntil(t, "the idle session to end", func() bool { return srv.Stats().Sessions.Held == 0 })
}

// TestFastPathDuplicateRequestID: a call whose id is in flight on its
// session is refused as the SDK refuses it, 400 with -32600, and the call
// in flight goes on.
func TestFastPathDuplicateRequestID(t *testing.T) {
	answers := map[bool]answer{}
	for _, fast := range []bool{true, false} {
		cat := newCatalog(t, catalog.Config{})
		entered, release, ended := holdTool(t, cat)
		srv := newServer(t, cat, mcpserve.Options{})
		if !fast {
			mcpserve.NoFastPath(srv)
		}
		url := serve(t, srv, false)
		id := openSessionAt(t, url)
		if fast {
			awaitFastPath(t, srv, id)
		}
		done := postHeld(t, url, id)
		wait(t, entered, "the body to start")
		p := &twoPaths{sessions: map[string]string{url: id}}
		answers[fast] = p.send(t, url, exchange{body: []byte(holdCall), headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}})
		close(release)
		if err := <-ended; err != nil {
			t.Errorf("fast=%v: the call in flight ended with %v", fast, err)
		}
		if code := <-done; code != http.StatusOK {
			t.Errorf("fast=%v: the call in flight = %d", fast, code)
		}
	}
	if answers[true].status != http.StatusBadRequest {
		t.Errorf("the fast path answered the duplicate %+v, want 400", answers[true])
	}
	compareAnswers(t, exchange{body: []byte(holdCall)}, answers[true], answers[false])
}

// postHeld sends holdCall on session id at url from a goroutine of its own,
// and delivers the HTTP status of its answer.
func postHeld(t *testing.T, url, id string) <-chan int {
	done := make(chan int, 1)
	go func() {
		resp := rawPostResponse(t, url, holdCall, sessionHeaders(id))
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}
