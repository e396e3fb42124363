package mcpserve_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

const (
	goodToken   = "good-token-3f9a"
	noRoleToken = "norole-token-77c1"
)

// guarded is a catalog whose tool and resource need the role "reader", and
// counts how often their bodies run.
type guarded struct {
	cat        *catalog.Catalog
	auth       bindsec.Authenticator
	toolRuns   atomic.Int64
	readerRuns atomic.Int64
}

func newGuarded(t *testing.T) *guarded {
	g := &guarded{auth: bindsec.NewStaticTokens(map[string]bindsec.Principal{
		goodToken:   bindsec.NewPrincipal("alice", "reader"),
		noRoleToken: bindsec.NewPrincipal("bob"),
	})}
	g.cat = newCatalog(t, catalog.Config{Authenticator: g.auth})
	plan := bindsec.Plan{Roles: []string{"reader"}}
	k, err := g.cat.StartTool(context.Background(), catalog.Tool{Name: "guarded"}, plan,
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			g.toolRuns.Add(1)
			return catalog.TextResult("hello " + c.Principal.Subject()), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	r, err := g.cat.StartResource(context.Background(), catalog.Resource{URI: "secret://doc", Name: "doc"}, plan,
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			g.readerRuns.Add(1)
			return catalog.Contents{Text: "classified"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return g
}

// The Authorization header is the credential: the body runs only for a
// token with the role; every refusal is a tool error result that says why
// and contains no credential.
func TestAuthMatrix(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{})
	cases := []struct {
		name, header string
		ok           bool
		why          string // a word the denial text contains
	}{
		{"no header", "", false, "bearer credential is required"},
		{"bad token", "Bearer wrong-token", false, "bearer credential is required"},
		{"other scheme", "Basic " + goodToken, false, "bearer credential is required"},
		{"token without the role", "Bearer " + noRoleToken, false, "lacks a role"},
		{"good token", "Bearer " + goodToken, true, ""},
		{"good token, lower-case scheme", "bearer " + goodToken, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := f.connectHeader(tc.header)
			toolBefore, readBefore := g.toolRuns.Load(), g.readerRuns.Load()
			res, err := call(t, c, "guarded")
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			rr, rerr := c.ReadResource(ctxGuard(t), &mcp.ReadResourceParams{URI: "secret://doc"})
			toolRan, readRan := g.toolRuns.Load()-toolBefore, g.readerRuns.Load()-readBefore
			if tc.ok {
				if res.IsError || text(t, res) != "hello alice" || toolRan != 1 {
					t.Errorf("call = %+v (body ran %d times), want the body's answer once", res, toolRan)
				}
				if rerr != nil || rr.Contents[0].Text != "classified" || readRan != 1 {
					t.Errorf("read = %+v, %v (body ran %d times)", rr, rerr, readRan)
				}
				return
			}
			if !res.IsError || toolRan != 0 || readRan != 0 {
				t.Fatalf("denied call = %+v; bodies ran %d+%d times, want a tool error and 0", res, toolRan, readRan)
			}
			msg := text(t, res)
			if !strings.Contains(msg, tc.why) || strings.Contains(msg, goodToken) || strings.Contains(msg, noRoleToken) ||
				strings.Contains(msg, "wrong-token") {
				t.Errorf("denial text %q: want %q and no credential", msg, tc.why)
			}
			if rpcCode(rerr) != mcpserve.CodeDenied {
				t.Errorf("denied read: err = %v, want code %d", rerr, mcpserve.CodeDenied)
			}
		})
	}
}

// connectHeader connects over HTTP sending the Authorization header as is.
func (f *fixture) connectHeader(header string) *client {
	if token, ok := strings.CutPrefix(header, "Bearer "); ok {
		return f.connect(streamable, token)
	}
	f.t.Helper()
	c := &client{tools: make(chan struct{}, 16), resources: make(chan struct{}, 16)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "raw-header", Version: "1"}, &mcp.ClientOptions{Logger: quietLogger()})
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	cs, err := cl.Connect(ctxGuard(f.t), &mcp.StreamableClientTransport{Endpoint: f.http.URL, HTTPClient: hc, MaxRetries: -1}, sessionful)
	if err != nil {
		f.t.Fatal(err)
	}
	c.ClientSession = cs
	f.t.Cleanup(func() { _ = cs.Close() })
	return c
}

// Options.TransportCredential gives a credential to an in-memory session, which
// has no headers, presents a fixed token.
func TestCredentialOption(t *testing.T) {
	g := newGuarded(t)
	f := newFixture(t, g.cat, mcpserve.Options{
		TransportCredential: func(context.Context, mcp.Request) string { return goodToken },
	})
	c := f.connect(memory, "")
	res, err := call(t, c, "guarded")
	if err != nil || res.IsError || text(t, res) != "hello alice" || g.toolRuns.Load() != 1 {
		t.Fatalf("call = %+v, %v", res, err)
	}

	// Without the option, the same in-memory session presents nothing.
	f2 := newFixture(t, g.cat, mcpserve.Options{})
	res, err = call(t, f2.connect(memory, ""), "guarded")
	if err != nil || !res.IsError || g.toolRuns.Load() != 1 {
		t.Fatalf("call without a credential = %+v, %v", res, err)
	}

	// Over HTTP the bearer header alone is the credential: a request
	// without one presents nothing, whatever the option gives.
	res, err = call(t, f.connect(streamable, ""), "guarded")
	if err != nil || !res.IsError || g.toolRuns.Load() != 1 {
		t.Fatalf("HTTP call without a bearer token = %+v, %v", res, err)
	}
}
