package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// The workload through a real MCP client against the in-process server:
// the checks hold on that path too, and protocol latency is reported
// beside in-process latency.
func TestRunMCP(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = time.Second
	cfg.MCP = true
	cfg.Resolvers = 2
	sys, err := NewCatalogSystem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), cfg, sys, RunOptions{mcp: &mcpDriver{cat: sys.Cat}})

	if got := rep.TotalViolations(); got != 0 {
		t.Errorf("%v: rep.TotalViolations() = %v, want 0", rep.ViolationExamples, got)
	}
	if got := rep.Errors; got != 0 {
		t.Errorf("%v: rep.Errors = %v, want 0", rep.ErrorExamples, got)
	}
	if !strings.Contains(rep.Mode, "mcp") {
		t.Errorf("%q lacks %q", rep.Mode, "mcp")
	}
	if got := rep.Ops["call"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"call\"].Count = %v, want > 0", got)
	}
	if got := rep.Ops["mcp_call"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"mcp_call\"].Count = %v, want > 0", got)
	}
	if got := rep.Ops["mcp_list"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"mcp_list\"].Count = %v, want > 0", got)
	}
	// Prompts and templated reads go through the client too.
	if got := rep.Ops["mcp_get"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"mcp_get\"].Count = %v, want > 0", got)
	}
	if got := rep.Ops["mcp_read"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"mcp_read\"].Count = %v, want > 0", got)
	}
	if got := rep.MCPCallOutcomes["ok"]; got <= 0 {
		t.Errorf("%v: rep.MCPCallOutcomes[\"ok\"] = %v, want > 0", rep.MCPCallOutcomes, got)
	}
	if got := rep.MCPCallOutcomes["denied"] + rep.MCPCallOutcomes["unknown"]; got <= 0 {
		t.Errorf("%v: rep.MCPCallOutcomes[\"denied\"]+rep.MCPCallOutcomes[\"unknown\"] = %v, want > 0", rep.MCPCallOutcomes, got)
	}
	// The end-of-run probe alone checks invariant 10 three times.
	if got := rep.Checks[InvListChanged.String()]; got < int64(3) {
		t.Errorf("rep.Checks[InvListChanged.String()] = %v, want at least int64(3)", got)
	}
}

// -protocol 2026-07-28: the clients speak the revision without sessions to
// a stateless in-process server, and invariant 10 holds over their
// subscriptions/listen streams, the end-of-run probe included.
func TestRunMCPCurrentProtocol(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = time.Second
	cfg.Resolvers = 2
	cfg.Protocol = ProtocolCurrent
	cfg.MCP = true
	sys, err := NewCatalogSystem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := &mcpDriver{cat: sys.Cat, protocol: cfg.Protocol}
	rep := Run(context.Background(), cfg, sys, RunOptions{mcp: d})

	if got := rep.TotalViolations(); got != 0 {
		t.Errorf("%v: rep.TotalViolations() = %v, want 0", rep.ViolationExamples, got)
	}
	if got := rep.Errors; got != 0 {
		t.Errorf("%v: rep.Errors = %v, want 0", rep.ErrorExamples, got)
	}
	if !strings.Contains(rep.Mode, "stateless, MCP "+ProtocolCurrent) {
		t.Errorf("%q lacks %q", rep.Mode, "stateless, MCP "+ProtocolCurrent)
	}
	if got := rep.MCPCallOutcomes["ok"]; got <= 0 {
		t.Errorf("%v: rep.MCPCallOutcomes[\"ok\"] = %v, want > 0", rep.MCPCallOutcomes, got)
	}
	if got := rep.Ops["mcp_list"].Count; got <= 0 {
		t.Errorf("rep.Ops[\"mcp_list\"].Count = %v, want > 0", got)
	}
	if got := rep.Checks[InvListChanged.String()]; got < int64(3) {
		t.Errorf("rep.Checks[InvListChanged.String()] = %v, want at least int64(3)", got)
	}
}

// A run that asks for the current revision gets it from a default
// (stateful) livereg server, which serves every client generation on one
// endpoint, and passes.
func TestMainProtocolCurrentOnStatefulTarget(t *testing.T) {
	cat, err := catalog.New(catalog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()

	url := "http://" + ln.Addr().String() + "/mcp"
	var out, errOut bytes.Buffer
	code := Main([]string{"-target", url, "-protocol", ProtocolCurrent, "-duration", "200ms", "-resolvers", "1"}, &out, &errOut)
	if got, want := code, ExitOK; got != want {
		t.Errorf("code = %v, want %v: %s", got, want, errOut.String())
	}
	if !strings.Contains(out.String(), "MCP "+ProtocolCurrent) {
		t.Errorf("%q lacks %q", out.String(), "MCP "+ProtocolCurrent)
	}
}

// -target drives a running server at a loopback URL.
func TestMainTarget(t *testing.T) {
	cat, err := catalog.New(catalog.Config{Authenticator: Authenticator()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	echo := func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("hi"), nil }
	open, err := cat.StartTool(ctx, catalog.Tool{Name: "open"}, bindsec.Plan{Public: true}, echo)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Stop(ctx)
	guarded, err := cat.StartTool(ctx, catalog.Tool{Name: "guarded"}, bindsec.Plan{Roles: []string{roleCall}}, echo)
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Stop(ctx)

	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()

	url := "http://" + ln.Addr().String() + "/mcp"
	var out, errOut bytes.Buffer
	code := Main([]string{"-target", url, "-duration", "700ms", "-resolvers", "2", "-json", "-"}, &out, &errOut)
	if got, want := code, ExitOK; got != want {
		t.Fatalf("stdout:\n%s\nstderr:\n%s: code = %v, want %v", out.String(), errOut.String(), got, want)
	}
	if !strings.Contains(out.String(), "mcp: "+url) {
		t.Errorf("%q lacks %q", out.String(), "mcp: "+url)
	}
	if !regexp.MustCompile(`(?m)^\s+mcp_call\s+[1-9]`).MatchString(out.String()) {
		t.Errorf("%q does not match %q", out.String(), `(?m)^\s+mcp_call\s+[1-9]`)
	}
}

func TestClassifyMCP(t *testing.T) {
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	gone, _ := json.Marshal(map[string]any{"reason": "route_gone"})
	tests := []struct {
		res  *mcp.CallToolResult
		err  error
		want outcome
	}{
		{&mcp.CallToolResult{}, nil, outcomeOK},
		{text(`tool "x": access denied: the credential lacks a role`), nil, outcomeDenied},
		{text(`tool "x" failed: internal error`), nil, outcomePanicked},
		{text(`loadgen: bad arguments`), nil, outcomeToolError},
		{nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "x"`}, outcomeUnknown},
		{nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "gone", Data: gone}, outcomeGone},
		{nil, &jsonrpc.Error{Code: mcpCodeOverloaded, Message: "overloaded"}, outcomeOverloaded},
		{nil, context.Canceled, outcomeCanceled},
		{nil, errors.New("connection refused"), outcomeOther},
	}
	for _, tt := range tests {
		if got, want := classifyMCP(tt.res, tt.err), tt.want; got != want {
			t.Errorf("%v %v: classifyMCP(tt.res, tt.err) = %v, want %v", tt.res, tt.err, got, want)
		}
	}
}
