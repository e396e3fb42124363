package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/mcpserve"
)

// runMainEnv makes the test binary act as livereg-mcp itself, so that the
// stdio test can launch it as a subprocess.
const runMainEnv = "LIVEREG_MCP_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const guard = 30 * time.Second

func ctxGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestParseArgs(t *testing.T) {
	env := func(k string) string {
		if k == tokensEnv {
			return "from-env=bob"
		}
		return ""
	}
	cfg, err := parseArgs(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "127.0.0.1:8931" || cfg.path != "/mcp" || cfg.stdio || cfg.conformance || cfg.tokens != "from-env=bob" {
		t.Errorf("defaults = %+v", cfg)
	}
	cfg, err = parseArgs([]string{"-addr", ":1", "-stdio", "-conformance", "-tokens", "a=b", "-log-level", "debug"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != ":1" || !cfg.stdio || !cfg.conformance || cfg.tokens != "a=b" || cfg.logLevel != slog.LevelDebug {
		t.Errorf("parsed = %+v", cfg)
	}
	if _, err := parseArgs([]string{"extra"}, env, io.Discard); err == nil {
		t.Error("a stray argument was accepted")
	}
	if cfg.stateless || cfg.maxListens != 1000 {
		t.Errorf("stateless defaults = %v, %d", cfg.stateless, cfg.maxListens)
	}
	cfg, err = parseArgs([]string{"-stateless", "-max-listen-streams", "7"}, env, io.Discard)
	if err != nil || !cfg.stateless || cfg.maxListens != 7 {
		t.Errorf("-stateless -max-listen-streams 7 = %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{{"-stateless", "-stdio"}, {"-max-listen-streams", "0"}} {
		if _, err := parseArgs(bad, env, io.Discard); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}

// started is a run in progress.
type started struct {
	url    string
	cancel context.CancelFunc
	errc   chan error
}

// localConfig serves HTTP at /mcp on a free loopback port, with the
// bearer tokens of spec.
func localConfig(spec string) config {
	var cfg config
	cfg.addr, cfg.path, cfg.tokens = "127.0.0.1:0", "/mcp", spec
	return cfg
}

func startRun(t *testing.T, cfg config) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, errc: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { s.errc <- run(ctx, cfg, quiet(), func(url string) { ready <- url }) }()
	select {
	case s.url = <-ready:
	case err := <-s.errc:
		cancel()
		t.Fatalf("run ended before serving: %v", err)
	case <-time.After(guard):
		cancel()
		t.Fatal("run never became ready")
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *started) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.errc; err != nil {
		t.Errorf("run = %v, want nil after a shutdown", err)
	}
}

// connect connects a client of 2025-11-25, which holds a session: what
// most of these tests count.
func connect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	return connectAt(t, url, token, "2025-11-25")
}

// connectAt connects a client asking for version; "" asks for the newest
// the SDK speaks, 2026-07-28.
func connectAt(t *testing.T, url, token, version string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+token)
			return http.DefaultTransport.RoundTrip(r)
		})
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	var o *mcp.ClientSessionOptions
	if version != "" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func firstText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("no content in %+v", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("first item is %T", r.Content[0])
	}
	return tc.Text
}

func TestServesDemoAndConformanceFixtures(t *testing.T) {
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "url")
	cfg := localConfig(aliceToken + "@alice:admin")
	cfg.conformance, cfg.urlFile = true, urlFile
	s := startRun(t, cfg)
	if b, err := os.ReadFile(urlFile); err != nil || strings.TrimSpace(string(b)) != s.url {
		t.Errorf("url file = %q, %v; want %q", b, err, s.url)
	}
	if !strings.HasSuffix(s.url, "/mcp") {
		t.Errorf("url %q does not end in /mcp", s.url)
	}
	anon, alice := connect(t, s.url, ""), connect(t, s.url, aliceToken)
	ctx := ctxGuard(t)

	var names []string
	for tool, err := range anon.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %q lacks a description or input schema", tool.Name)
		}
		names = append(names, tool.Name)
	}
	want := []string{"confirm_delete", "demo_crash", "demo_restart", "echo", "failing_job", "fortune", "greet", "json_schema_2020_12_tool", "multi_input", "ops_report", "protocol_error_job", "slow_compute", "stats",
		"test_audio_content", "test_custom_headers", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
		"test_embedded_resource", "test_error_handling", "test_image_content",
		"test_input_required_result_capabilities", "test_input_required_result_elicitation", "test_input_required_result_list_roots",
		"test_input_required_result_multi_round", "test_input_required_result_multiple_inputs", "test_input_required_result_request_state",
		"test_input_required_result_sampling", "test_input_required_result_tampered_state", "test_logging_tool", "test_missing_capability",
		"test_multiple_content_types", "test_sampling", "test_simple_text", "test_streaming_elicitation", "test_tool_with_logging",
		"test_tool_with_progress", "test_tool_with_task", "whoami"}
	if !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	callTool := func(cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if got := firstText(t, callTool(anon, "echo", map[string]any{"text": "ping"})); got != "ping" {
		t.Errorf("echo = %q", got)
	}
	if res := callTool(anon, "stats", nil); res.StructuredContent == nil || !strings.Contains(firstText(t, res), `"tools":39`) {
		t.Errorf("stats = %+v", res)
	}
	if res := callTool(anon, "whoami", nil); !res.IsError {
		t.Errorf("whoami without a token = %+v, want a denial", res)
	}
	if got := firstText(t, callTool(alice, "whoami", nil)); got != "subject: alice; roles: admin" {
		t.Errorf("whoami = %q", got)
	}
	if got := firstText(t, callTool(anon, "test_simple_text", nil)); got != "This is a simple text response for testing." {
		t.Errorf("test_simple_text = %q", got)
	}
	if img, ok := callTool(anon, "test_image_content", nil).Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" ||
		!bytes.HasPrefix(img.Data, []byte("\x89PNG")) {
		t.Errorf("test_image_content = %+v", img)
	}
	if au, ok := callTool(anon, "test_audio_content", nil).Content[0].(*mcp.AudioContent); !ok || au.MIMEType != "audio/wav" ||
		!bytes.HasPrefix(au.Data, []byte("RIFF")) {
		t.Errorf("test_audio_content = %+v", au)
	}
	if er, ok := callTool(anon, "test_embedded_resource", nil).Content[0].(*mcp.EmbeddedResource); !ok ||
		er.Resource.URI != "test://embedded-resource" || er.Resource.Text == "" {
		t.Errorf("test_embedded_resource = %+v", er)
	}
	if res := callTool(anon, "test_multiple_content_types", nil); len(res.Content) != 3 {
		t.Errorf("test_multiple_content_types = %+v", res)
	}
	if res := callTool(anon, "test_error_handling", nil); !res.IsError ||
		firstText(t, res) != "This tool intentionally returns an error for testing" {
		t.Errorf("test_error_handling = %+v", res)
	}
	rr, err := anon.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
	if err != nil || rr.Contents[0].Text != "This is the content of the static text resource." || rr.Contents[0].MIMEType != "text/plain" {
		t.Errorf("static-text = %+v, %v", rr, err)
	}
	rr, err = anon.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-binary"})
	if err != nil || !bytes.HasPrefix(rr.Contents[0].Blob, []byte("\x89PNG")) || rr.Contents[0].MIMEType != "image/png" {
		t.Errorf("static-binary = %+v, %v", rr, err)
	}
	rr, err = anon.ReadResource(ctx, &mcp.ReadResourceParams{URI: "livereg://about"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, "livereg") {
		t.Errorf("about = %+v, %v", rr, err)
	}

	// Only /mcp serves MCP.
	resp, err := http.Post(strings.TrimSuffix(s.url, "/mcp")+"/other", "application/json", strings.NewReader("{}"))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST /other = %d, want 404", resp.StatusCode)
		}
	}
	_ = anon.Close()
	_ = alice.Close()
	s.stop(t)
}

func TestRefusesExposedAddressWithoutTokens(t *testing.T) {
	cfg := localConfig("")
	cfg.addr = "0.0.0.0:0"
	err := run(context.Background(), cfg, quiet(), nil)
	if !errors.Is(err, mcpserve.ErrExposed) {
		t.Fatalf("run on 0.0.0.0 without tokens = %v, want ErrExposed", err)
	}
}

// The built binary serves stdio: launched as a subprocess by an SDK client,
// it answers, and exits when the client closes its stdin.
func TestStdio(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-stdio", "-conformance", "-log-level", "warn")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stderr = io.Discard
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil || firstText(t, res) != "This is a simple text response for testing." {
		t.Errorf("call over stdio = %+v, %v", res, err)
	}
	if res, err := cs.CallTool(ctxGuard(t), &mcp.CallToolParams{Name: "whoami"}); err != nil || !res.IsError {
		t.Errorf("whoami over stdio (no credential) = %+v, %v; want a denial", res, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("server process state = %v, want a clean exit", cmd.ProcessState)
	}
}
