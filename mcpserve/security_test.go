package mcpserve_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// ---- item: nil and panicking authenticators -----------------------------

// A typed-nil authenticator does not count as configured: exposure stays
// refused. (Where catalog.New refuses it outright, that is enough.)
func TestTypedNilAuthenticatorIsNotConfigured(t *testing.T) {
	var typedNil *bindsec.StaticTokens
	if err := mcpserve.CheckListenAddress(context.Background(), "0.0.0.0:0", typedNil); !errors.Is(err, mcpserve.ErrExposed) {
		t.Errorf("CheckListenAddress with a typed-nil authenticator = %v, want ErrExposed", err)
	}
	cat, err := catalog.New(catalog.Config{Authenticator: typedNil})
	if err != nil {
		if !errors.Is(err, bindsec.ErrInvalidAuthenticator) {
			t.Fatalf("catalog.New = %v, want ErrInvalidAuthenticator", err)
		}
		return
	}
	if err := mcpserve.CheckListenAddress(context.Background(), "0.0.0.0:0", cat.Authenticator()); !errors.Is(err, mcpserve.ErrExposed) {
		t.Errorf("CheckListenAddress with the catalog's typed-nil authenticator = %v, want ErrExposed", err)
	}
}

// panicAuth panics with the credential in its value, as a careless
// authenticator might.
type panicAuth struct{}

func (panicAuth) Authenticate(_ context.Context, cred string) (bindsec.Principal, error) {
	panic("bad token " + cred)
}

// A panicking authenticator fails the request closed, with an internal
// error, and is logged without the credential; the server lives on.
func TestPanickingAuthenticatorFailsClosed(t *testing.T) {
	cat := newCatalog(t, catalog.Config{Authenticator: panicAuth{}})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "guarded"}, bindsec.Plan{},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ran"), nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })

	// Over HTTP the front authenticates first, to bind the session.
	sink := newLogSink()
	f := newFixture(t, cat, mcpserve.Options{Logger: slog.New(sink)})
	code, _ := rawPost(t, f.http.URL, initializeBody, map[string][]string{"Authorization": {"Bearer " + goodToken}})
	if code != http.StatusInternalServerError {
		t.Errorf("initialize with a panicking authenticator: status %d, want 500", code)
	}
	if !sink.has(slog.LevelError, "authenticator panicked") {
		t.Error("the panic was not logged")
	}

	// On the dispatch path (a session with a credential from the option).
	sink2 := newLogSink()
	f2 := newFixture(t, cat, mcpserve.Options{Logger: slog.New(sink2),
		TransportCredential: func(context.Context, mcp.Request) string { return goodToken }})
	res, err := call(t, f2.connect(memory, ""), "guarded")
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "internal error") {
		t.Fatalf("call = %+v, %v; want an internal error result", res, err)
	}
	if !sink2.has(slog.LevelError, "authenticator panicked") {
		t.Error("the panic on the dispatch path was not logged")
	}
	for _, l := range append(sink.texts(), sink2.texts()...) {
		if strings.Contains(l, goodToken) {
			t.Errorf("a log line holds the credential: %s", l)
		}
	}
}

// texts renders every record kept, attributes included.
func (s *logSink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.records))
	for i, r := range s.records {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		out[i] = b.String()
	}
	return out
}

// ---- item: result size ---------------------------------------------------

// A result over Options.MaxResultBytes is not sent: the client gets an
// error that states the limit, and the server logs it.
func TestResultSizeLimited(t *testing.T) {
	const limit = 1000
	cat := newCatalog(t, catalog.Config{})
	big := strings.Repeat("x", limit+1)
	startText(t, cat, context.Background(), "big", big)
	startText(t, cat, context.Background(), "small", strings.Repeat("x", limit))
	k, err := cat.StartResource(context.Background(), catalog.Resource{URI: "mem://big", Name: "big"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Blob: []byte(big)}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	sink := newLogSink()
	f := newFixture(t, cat, mcpserve.Options{Logger: slog.New(sink), MaxResultBytes: limit})
	c := f.connect(streamable, "")

	res, err := call(t, c, "big")
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "limit of 1000 bytes") {
		t.Errorf("oversized tool result = %+v, %v; want an error result naming the limit", res, err)
	}
	if res, err := call(t, c, "small"); err != nil || res.IsError {
		t.Errorf("a result at the limit = %+v, %v", res, err)
	}
	_, err = c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "mem://big"})
	if rpcCode(err) != jsonrpc.CodeInternalError || !strings.Contains(err.Error(), "limit of 1000 bytes") {
		t.Errorf("oversized resource = %v; want -32603 naming the limit", err)
	}
	if !sink.has(slog.LevelWarn, "size limit") {
		t.Error("the refusal was not logged")
	}
	if _, err := mcpserve.New(cat, mcpserve.Options{MaxResultBytes: -1}); !errors.Is(err, mcpserve.ErrInvalidOptions) {
		t.Errorf("negative MaxResultBytes: %v, want ErrInvalidOptions", err)
	}
}

// ---- item: route visibility, documented as today's choice ----------------

// Listings show routes a caller may not call, and a denied read differs
// from an unknown one. Both are documented as today's choice; this pins
// the behaviour and the documentation together.
func TestVisibilityIsDocumented(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{})
	anon := f.connect(streamable, "")
	if names := toolNames(t, anon); len(names) != 1 || names[0] != "guarded" {
		t.Errorf("anonymous tools/list = %v, want the protected tool listed", names)
	}
	_, denied := anon.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
	_, unknown := anon.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://none"})
	if rpcCode(denied) != mcpserve.CodeDenied || rpcCode(unknown) == mcpserve.CodeDenied {
		t.Errorf("denied read = %v, unknown read = %v", denied, unknown)
	}
	for file, phrases := range map[string][]string{
		"doc.go":              {"# Visibility", "tools/list", "CodeDenied"},
		"../docs/security.md": {"# Security", "tools/list", "-32043", "MaxResultBytes", "ps"},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range phrases {
			if !bytes.Contains(b, []byte(p)) {
				t.Errorf("%s does not document %q", file, p)
			}
		}
	}
}

// ---- item: contradictory plans --------------------------------------------

// A public plan with roles is refused wherever a route starts, tools and
// resources alike, and nothing is served under it.
func TestPublicPlanWithRolesRefusedAtStart(t *testing.T) {
	cat := newCatalog(t, catalog.Config{Authenticator: bindsec.NewStaticTokens(nil)})
	bad := bindsec.Plan{Public: true, Roles: []string{"admin"}}
	_, err := cat.StartTool(context.Background(), catalog.Tool{Name: "t"}, bad,
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ran"), nil })
	if !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Errorf("StartTool with a public plan with roles = %v, want ErrInvalidPlan", err)
	}
	_, err = cat.StartResource(context.Background(), catalog.Resource{URI: "mem://r", Name: "r"}, bad,
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: "x"}, nil })
	if !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Errorf("StartResource with a public plan with roles = %v, want ErrInvalidPlan", err)
	}
	if tools, rs := cat.Tools().List(), cat.Resources().List(); len(tools) != 0 || len(rs) != 0 {
		t.Errorf("refused routes are listed: %v %v", tools, rs)
	}
}
