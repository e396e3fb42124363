package mcpserve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/livereg/livereg/bindsec"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

var listenParams = map[string]any{"notifications": map[string]any{"toolsListChanged": true}}

// untilListens waits until the server counts open listen streams.
func untilListens(t *testing.T, srv *mcpserve.Server, open int64) {
	t.Helper()
	deadline := time.Now().Add(eventGuard)
	for srv.Stats().ListenStreams.Held != open {
		if time.Now().After(deadline) {
			t.Fatalf("listen streams open = %d, want %d", srv.Stats().ListenStreams.Held, open)
		}
		time.Sleep(time.Millisecond)
	}
}

// At the cap a subscriptions/listen is refused with CodeOverloaded and a
// reason, the open stream is untouched, and once it ends a new one is
// admitted.
func TestListenStreamCap(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	// One client's share is the whole cap here, so that the cap itself,
	// not the share (shares_test.go), refuses the second stream.
	f := newStateless(t, cat, mcpserve.Options{MaxListenStreams: 1, ClientShare: 1})
	a := f.connectCurrent("")
	if st := f.srv.Stats().ListenStreams; st.Held != 1 || st.Max != 1 {
		t.Fatalf("after one client: %+v", st)
	}
	// The first message is the answer: a refusal, or the acknowledgement
	// of a stream that a wrong count admitted and that never ends.
	msg := firstMessage(t, post(t, f.http.URL, "", "subscriptions/listen", "", listenParams))
	if msg.Error == nil || msg.Error.Code != mcpserve.CodeOverloaded {
		t.Fatalf("listen at the cap = %+v, want CodeOverloaded", msg)
	}
	var data struct {
		Reason    string
		Retryable bool
	}
	if err := json.Unmarshal(msg.Error.Data, &data); err != nil || data.Reason != "too_many_listen_streams" || !data.Retryable {
		t.Errorf("refusal data = %s", msg.Error.Data)
	}
	if st := f.srv.Stats().ListenStreams; st.Held != 1 || st.RefusedAtCap != 1 {
		t.Errorf("after the refusal: %+v", st)
	}
	// The open stream still carries notifications.
	startText(t, cat, context.Background(), "hello", "hi")
	wait(t, a.tools, "list_changed on the stream admitted first")

	_ = a.Close()
	untilListens(t, f.srv, 0)
	if n := mcpserve.ListensHeld(f.srv); n != 0 {
		t.Fatalf("no listen stream is open, and the server still holds %d", n)
	}
	b := f.connectCurrent("")
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "again"}, bindsec.Plan{Public: true}, victimHandler("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	wait(t, b.tools, "list_changed on the stream admitted after the first ended")
	if st := f.srv.Stats().ListenStreams; st.Held != 1 || st.Opened != 2 || st.RefusedAtCap != 1 {
		t.Errorf("at the end: %+v, want 1 open, 2 opened, 1 refused", st)
	}
}

// Close ends every open listen stream (their HTTP responses end), refuses
// new ones, returns within its bound and leaves no goroutine behind.
func TestCloseEndsListenStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newCatalog(t, catalog.Config{})
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: quietLogger(), Stateless: true, ShutdownTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	f := wrapFixture(t, cat, srv)
	c := f.connectCurrent("")
	ended := make(chan []rpcMessage, 1)
	resp := post(t, f.http.URL, "", "subscriptions/listen", "", listenParams)
	go func() { ended <- messages(t, resp) }()
	untilListens(t, srv, 2)

	closed := make(chan struct{})
	go func() { _ = srv.Close(); close(closed) }()
	wait(t, closed, "Close")
	if st := srv.Stats().ListenStreams; st.Held != 0 {
		t.Errorf("after Close: %+v", st)
	}
	select {
	case msgs := <-ended:
		if len(msgs) < 1 || msgs[0].Method != "notifications/subscriptions/acknowledged" {
			t.Errorf("the listen stream carried %+v", msgs)
		}
	case <-time.After(eventGuard):
		t.Fatal("the listen stream's response did not end at Close")
	}
	if msg := firstMessage(t, post(t, f.http.URL, "", "subscriptions/listen", "", listenParams)); msg.Error == nil {
		t.Errorf("listen after Close = %+v, want an error", msg)
	}
	// What the test holds (its client, the HTTP server) goes now, before
	// the leak check: only the server's goroutines are in question.
	_ = c.Close()
	f.http.CloseClientConnections()
	f.http.Close()
}

// A graceful shutdown ends the listen streams first, so that it does not
// wait its whole bound for requests that never end by themselves.
func TestServeShutdownEndsListenStreams(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	sink := newLogSink("shutting down")
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: slog.New(sink), Stateless: true, ShutdownTimeout: 2 * hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/mcp"
	ended := make(chan []rpcMessage, 1)
	resp := post(t, url, "", "subscriptions/listen", "", listenParams)
	go func() { ended <- messages(t, resp) }()
	untilListens(t, srv, 1)

	// The shutdown ends the stream first thing; one that waited for it
	// would wait out its whole bound.
	cancel()
	select {
	case <-ended:
	case <-time.After(eventGuard):
		t.Fatal("the shutdown did not end the open listen stream")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(eventGuard):
		t.Fatal("the shutdown waited on something after the listen stream ended")
	}
	if sink.has(slog.LevelWarn, "graceful shutdown incomplete") {
		t.Error("the shutdown had to force connections closed")
	}
}

// firstMessage reads the first JSON-RPC message of a response, a JSON body
// or a server-sent event stream, and closes the body: a stream that should
// not be open fails the test at once instead of when its guard ends.
func firstMessage(t testing.TB, resp *http.Response) rpcMessage {
	t.Helper()
	defer resp.Body.Close()
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data := strings.TrimSpace(sc.Text())
		if sse {
			var ok bool
			if data, ok = strings.CutPrefix(sc.Text(), "data: "); !ok {
				continue
			}
		}
		if data == "" {
			continue
		}
		var m rpcMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("undecodable message %q: %v", data, err)
		}
		return m
	}
	t.Fatalf("the response ended without a message: %v", sc.Err())
	return rpcMessage{}
}
