package mcpserve_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// ---- HTTP hygiene --------------------------------------------------

// rawConn opens a TCP connection to the host of url; reads on it fail
// after hangGuard.
func rawConn(t *testing.T, url string) net.Conn {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(hangGuard))
	return conn
}

// readAll reads until the server closes the connection; it fails the test
// if the guard expires first.
func readAll(t *testing.T, conn net.Conn) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server kept the connection open; read so far: %q", b.String())
			}
			return b.String()
		}
	}
}

// A body trickled in slower than ReadTimeout allows is cut off.
func TestSlowBodyCutOff(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{Limits: mcpserve.Limits{ReadTimeout: 100 * time.Millisecond}})
	conn := rawConn(t, serve(t, srv, false))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{", len(initializeBody))
	// The rest never comes.
	if got := readAll(t, conn); strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Errorf("a stalled body was served: %q", got)
	}
}

// A keep-alive connection left idle is closed.
func TestIdleConnectionClosed(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{Limits: mcpserve.Limits{
		IdleTimeout: 50 * time.Millisecond, ReadTimeout: time.Hour, ReadHeaderTimeout: time.Hour,
	}})
	conn := rawConn(t, serve(t, srv, false))
	fmt.Fprintf(conn, "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if got := readAll(t, conn); !strings.HasPrefix(got, "HTTP/1.1 404") {
		t.Errorf("answer: %q", got)
	}
}

// Headers over MaxHeaderBytes are refused.
func TestHugeHeadersRefused(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{})
	url := serve(t, srv, false)
	code, _ := rawPost(t, url, initializeBody, map[string][]string{"X-Pad": {strings.Repeat("p", 2*mcpserve.DefaultMaxHeaderBytes)}})
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("initialize with 128 KiB of headers = %d, want 431", code)
	}
}

// ReadTimeout and WriteTimeout bound reading a request and each write,
// not how long a call or a standalone stream lasts.
func TestLongCallsAndStreamsOutliveTimeouts(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
			select {
			case <-release:
				return catalog.TextResult("done"), nil
			case <-ctx.Done():
				return catalog.Result{}, context.Cause(ctx)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	const d = 50 * time.Millisecond
	srv := newServer(t, cat, mcpserve.Options{Limits: mcpserve.Limits{ReadTimeout: d, WriteTimeout: d}})
	changed := make(chan struct{}, 16)
	c := connectURL(t, serve(t, srv, false), func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} })
	res := make(chan string, 1)
	go func() {
		r, err := c.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "slow"})
		switch {
		case err != nil:
			res <- err.Error()
		case r.IsError:
			res <- fmt.Sprint(r.Content)
		default:
			res <- "ok"
		}
	}()
	// Several times the timeouts; what is checked is the outcome, not
	// when it arrives.
	time.Sleep(8 * d)
	close(release)
	if got := <-res; got != "ok" {
		t.Errorf("a call longer than ReadTimeout: %s", got)
	}
	startText(t, cat, context.Background(), "later", "x")
	wait(t, changed, "list_changed on a stream older than the timeouts")
}

// ---- what the SDK answers before livereg sees a request -----------

// rawPostBody is rawPost that returns the body.
func rawPostBody(t *testing.T, url, body string, headers map[string][]string) (int, string) {
	t.Helper()
	resp := rawPostResponse(t, url, body, headers)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The README's table of SDK behaviours, pinned: if an SDK upgrade changes
// one, this fails and the table must change with it.
func TestSDKWireBehavioursAsDocumented(t *testing.T) {
	srv := newServer(t, newCatalog(t, catalog.Config{}), mcpserve.Options{})
	url := serve(t, srv, false)
	code, id := rawPost(t, url, initializeBody, nil)
	if code != http.StatusOK {
		t.Fatalf("initialize = %d", code)
	}
	sess := map[string][]string{"Mcp-Session-Id": {id}}
	// Before notifications/initialized: answered.
	if code, body := rawPostBody(t, url, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, sess); code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Errorf("ping before initialized = %d %q", code, body)
	}
	if code, body := rawPostBody(t, url, `{"jsonrpc":"2.0","id":3,"method":"no/such"}`, sess); code != http.StatusBadRequest ||
		!strings.Contains(body, `"no/such" unsupported`) {
		t.Errorf("unknown method = %d %q", code, body)
	}
	// The SDK would answer a batch without a protocol version header; the
	// front refuses it first (screen), on a session of 2025-11-25.
	if code, body := rawPostBody(t, url, `[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}]`, sess); code != http.StatusBadRequest ||
		!strings.Contains(body, `"code":-32600`) {
		t.Errorf("batch without a protocol version header = %d %q", code, body)
	}
}
