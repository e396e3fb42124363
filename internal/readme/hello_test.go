package readme

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helloDir is where the go command believes the hello world lives, in
// this module, while it builds it: the file itself comes from an overlay,
// so nothing is ever written into the tree. No such folder exists.
const helloDir = "internal/readme/helloworld"

// servingLine is the line the hello world logs once it listens; group 1
// is the URL a client connects to.
var servingLine = regexp.MustCompile(`serving MCP at (http://\S+)`)

// The README's hello world runs as written: its first complete program is
// built from the README's text, started on a free loopback port, and
// served one real MCP session by the SDK's client: greet is listed with
// the schema its type gives it, answers a call with structured content,
// and a call with a bad argument is refused with -32602. Then an
// interrupt, Ctrl-C's signal, must shut it down with exit status 0. A
// README whose server no longer builds, starts, serves or stops fails
// here, with compile errors pointing at README lines.
func TestHelloWorldRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program with the go command")
	}
	md, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildHello(t, md)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var logs lockedBuffer
	urls := make(chan string, 1)
	go func() {
		// Read to the end, so that the server never blocks on its log.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteLine(sc.Text())
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var url string
	select {
	case url = <-urls:
	case err := <-exited:
		stopped = true
		t.Fatalf("the hello world exited before serving: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the hello world did not log where it serves within 30 s:\n%s", logs.String())
	}

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", url, err, logs.String())
	}
	checkGreet(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("after an interrupt the hello world exited with %v, want status 0\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the hello world did not exit within 30 s of an interrupt:\n%s", logs.String())
	}
}

// checkGreet makes the calls the README describes, through cs.
func checkGreet(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "greet" {
		t.Fatalf("tools/list = %+v, want greet alone", tools.Tools)
	}
	if schema, err := json.Marshal(tools.Tools[0].InputSchema); err != nil || !bytes.Contains(schema, []byte(`"name"`)) {
		t.Errorf("greet's input schema %s (%v) does not name the argument", schema, err)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
	if err != nil {
		t.Fatalf("tools/call greet: %v", err)
	}
	got, err := json.Marshal(res.StructuredContent)
	if err != nil || res.IsError || string(got) != `{"greeting":"hello, Ada"}` {
		t.Errorf("greet Ada = %s (isError %v, %v), want {\"greeting\":\"hello, Ada\"}", got, res.IsError, err)
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": 7}})
	if we := (*jsonrpc.Error)(nil); !errors.As(err, &we) || we.Code != -32602 {
		t.Errorf("greet with a number for a name: %v, want JSON-RPC error -32602", err)
	}
}

// buildHello writes the README's first complete program to a temporary
// file and builds it, as a package of this module, through an overlay;
// it returns the binary. The source starts with a //line directive, so
// that compile errors name README lines.
func buildHello(t *testing.T, md []byte) string {
	t.Helper()
	blocks, err := goBlocks("README.md", md)
	if err != nil {
		t.Fatal(err)
	}
	var hello *block
	for i := range blocks {
		if blocks[i].program {
			hello = &blocks[i]
			break
		}
	}
	if hello == nil {
		t.Fatal("README.md has no complete program: the hello world is gone")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, helloDir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (%v): the overlay would build it rather than the README", helloDir, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, fmt.Appendf(nil, "//line README.md:%d:1\n%s", hello.line, hello.src), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, helloDir, "main.go"): src},
	})
	if err != nil {
		t.Fatal(err)
	}
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-overlay", ovFile, "-o", bin, "./"+helloDir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's hello world does not build: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer collects a process's log lines for failure messages, from
// the goroutine that reads them while the test reads the whole.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
	l.b.WriteByte('\n')
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
