package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	rep := Run(context.Background(), cfg, sys, RunOptions{mcp: &mcpDriver{cat: sys.Cat}})

	assert.Zero(t, rep.TotalViolations(), "%v", rep.ViolationExamples)
	assert.Zero(t, rep.Errors, "%v", rep.ErrorExamples)
	assert.Contains(t, rep.Mode, "mcp")
	assert.Positive(t, rep.Ops["call"].Count)
	assert.Positive(t, rep.Ops["mcp_call"].Count)
	assert.Positive(t, rep.Ops["mcp_list"].Count)
	// Prompts and templated reads go through the client too.
	assert.Positive(t, rep.Ops["mcp_get"].Count)
	assert.Positive(t, rep.Ops["mcp_read"].Count)
	assert.Positive(t, rep.MCPCallOutcomes["ok"], "%v", rep.MCPCallOutcomes)
	assert.Positive(t, rep.MCPCallOutcomes["denied"]+rep.MCPCallOutcomes["unknown"], "%v", rep.MCPCallOutcomes)
	// The end-of-run probe alone checks invariant 10 three times.
	assert.GreaterOrEqual(t, rep.Checks[InvListChanged.String()], int64(3))
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
	require.NoError(t, err)
	d := &mcpDriver{cat: sys.Cat, protocol: cfg.Protocol}
	rep := Run(context.Background(), cfg, sys, RunOptions{mcp: d})

	assert.Zero(t, rep.TotalViolations(), "%v", rep.ViolationExamples)
	assert.Zero(t, rep.Errors, "%v", rep.ErrorExamples)
	assert.Contains(t, rep.Mode, "stateless, MCP "+ProtocolCurrent)
	assert.Positive(t, rep.MCPCallOutcomes["ok"], "%v", rep.MCPCallOutcomes)
	assert.Positive(t, rep.Ops["mcp_list"].Count)
	assert.GreaterOrEqual(t, rep.Checks[InvListChanged.String()], int64(3))
}

// A run that asks for the current revision refuses a server that does not
// speak it, rather than pass on the legacy one the SDK falls back to.
func TestMainProtocolRefusesStatefulTarget(t *testing.T) {
	cat, err := catalog.New(catalog.Config{})
	require.NoError(t, err)
	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: discardLogger})
	require.NoError(t, err)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()

	url := "http://" + ln.Addr().String() + "/mcp"
	var out, errOut bytes.Buffer
	code := Main([]string{"-target", url, "-protocol", ProtocolCurrent, "-duration", "200ms", "-resolvers", "1"}, &out, &errOut)
	assert.Equal(t, ExitViolations, code)
	assert.Contains(t, out.String()+errOut.String(), "speaks MCP "+ProtocolLegacy+", not the "+ProtocolCurrent)
}

// -target drives a running server at a loopback URL.
func TestMainTarget(t *testing.T) {
	cat, err := catalog.New(catalog.Config{Authenticator: Authenticator()})
	require.NoError(t, err)
	ctx := context.Background()
	echo := func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("hi"), nil }
	open, err := cat.StartTool(ctx, catalog.Tool{Name: "open"}, bindsec.Plan{Public: true}, echo)
	require.NoError(t, err)
	defer open.Stop(ctx)
	guarded, err := cat.StartTool(ctx, catalog.Tool{Name: "guarded"}, bindsec.Plan{Roles: []string{roleCall}}, echo)
	require.NoError(t, err)
	defer guarded.Stop(ctx)

	srv, err := mcpserve.New(cat, mcpserve.Options{Logger: discardLogger})
	require.NoError(t, err)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()

	url := "http://" + ln.Addr().String() + "/mcp"
	var out, errOut bytes.Buffer
	code := Main([]string{"-target", url, "-duration", "700ms", "-resolvers", "2", "-json", "-"}, &out, &errOut)
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "mcp: "+url)
	assert.Regexp(t, `(?m)^\s+mcp_call\s+[1-9]`, out.String())
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
		assert.Equal(t, tt.want, classifyMCP(tt.res, tt.err), "%v %v", tt.res, tt.err)
	}
}
