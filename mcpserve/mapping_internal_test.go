package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// want is what one error maps to on the wire.
type want struct {
	code    int64  // JSON-RPC error code; 0: a tool result
	isError bool   // for a tool result
	text    string // substring of the message or result text
	reason  string // data.reason, if any
}

// The error mapping, case by case, including the race a wire test can only
// hit by chance: a route gone between lookup and hand-off.
func TestErrorMapping(t *testing.T) {
	cat, err := catalog.New(catalog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cat, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wrap := func(e error) error { return fmt.Errorf("catalog: tool %q: %w", "x", e) }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		tool want
		read want
	}{
		{"unknown", context.Background(), fmt.Errorf("catalog: %w %q", catalog.ErrNotFound, "x"),
			want{code: -32602, text: "unknown tool"}, want{code: -32602, text: "not found"}},
		{"route gone", context.Background(), wrap(catalog.ErrRouteGone),
			want{code: -32602, text: "is gone", reason: "route_gone"}, want{code: -32602, text: "is gone", reason: "route_gone"}},
		{"no plan", context.Background(), wrap(bindsec.ErrNoPlan),
			want{isError: true, text: "no security plan"}, want{code: CodeDenied, text: "no security plan"}},
		{"unauthenticated", context.Background(), wrap(fmt.Errorf("%w: token t0ps3cret unknown", bindsec.ErrUnauthenticated)),
			want{isError: true, text: "bearer credential is required"}, want{code: CodeDenied, text: "bearer credential is required"}},
		{"forbidden", context.Background(), wrap(fmt.Errorf("%w: missing role %q", bindsec.ErrForbidden, "admin")),
			want{isError: true, text: "lacks a role"}, want{code: CodeDenied, text: "lacks a role"}},
		{"expired", context.Background(), wrap(bindsec.ErrExpired),
			want{isError: true, text: "expired"}, want{code: CodeDenied, text: "expired"}},
		{"panicked", context.Background(), wrap(fmt.Errorf("%w: secret panic value", catalog.ErrRoutePanicked)),
			want{isError: true, text: "internal error"}, want{code: jsonrpc.CodeInternalError, text: "internal error"}},
		{"overloaded", context.Background(), wrap(catalog.ErrOverloaded),
			want{code: CodeOverloaded, text: "overloaded", reason: "overloaded"}, want{code: CodeOverloaded, text: "overloaded", reason: "overloaded"}},
		{"cancelled", cancelled, context.Canceled,
			want{code: jsonrpc.CodeInternalError, text: "request ended"}, want{code: jsonrpc.CodeInternalError, text: "request ended"}},
		{"handler error", context.Background(), errors.New("disk full"),
			want{isError: true, text: "disk full"}, want{code: jsonrpc.CodeInternalError, text: "disk full"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.toolError(tc.ctx, "x", tc.err, false)
			check(t, "tools/call", res, err, tc.tool)
			readErr := tc.err
			if errors.Is(readErr, catalog.ErrNotFound) {
				readErr = fmt.Errorf("catalog: %w %q", catalog.ErrNotFound, "x://y")
			}
			check(t, "resources/read", nil, s.resourceError(tc.ctx, "x://y", readErr, false), tc.read)
		})
	}
}

func check(t *testing.T, what string, res mcp.Result, err error, w want) {
	t.Helper()
	if w.code != 0 {
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != w.code || !strings.Contains(we.Message, w.text) {
			t.Errorf("%s: got %v, %v; want code %d with %q", what, res, err, w.code, w.text)
			return
		}
		var data map[string]any
		_ = json.Unmarshal(we.Data, &data)
		if w.reason != "" && (data["reason"] != w.reason || data["retryable"] != true) {
			t.Errorf("%s: data %s, want reason %q, retryable", what, we.Data, w.reason)
		}
		for _, leak := range []string{"t0ps3cret", "secret panic value"} {
			if strings.Contains(we.Message, leak) {
				t.Errorf("%s: message %q leaks %q", what, we.Message, leak)
			}
		}
		return
	}
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || r.IsError != w.isError || len(r.Content) != 1 {
		t.Errorf("%s: got %+v, %v; want a tool result, isError %v", what, res, err, w.isError)
		return
	}
	txt := r.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(txt, w.text) || strings.Contains(txt, "t0ps3cret") || strings.Contains(txt, "secret panic value") {
		t.Errorf("%s: text %q, want %q and no secret", what, txt, w.text)
	}
}

// TestMCPLevel: a body's slog level reaches the client as the highest of
// MCP's eight levels at or below it.
func TestMCPLevel(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		//lint:ignore SA1019 MCP logging is deprecated as of 2026-07-28 but still served.
		want mcp.LoggingLevel
	}{
		{slog.LevelDebug - 4, "debug"},
		{slog.LevelDebug, "debug"},
		{slog.LevelInfo - 1, "debug"},
		{slog.LevelInfo, "info"},
		{mcp.LevelNotice, "notice"},
		{slog.LevelWarn - 1, "notice"},
		{slog.LevelWarn, "warning"},
		{slog.LevelError, "error"},
		{slog.LevelError + 3, "error"},
		{mcp.LevelCritical, "critical"},
		{mcp.LevelAlert, "alert"},
		{mcp.LevelEmergency, "emergency"},
		{mcp.LevelEmergency + 100, "emergency"},
	} {
		if got := mcpLevel(tc.level); got != tc.want {
			t.Errorf("mcpLevel(%v) = %q, want %q", tc.level, got, tc.want)
		}
	}
}
