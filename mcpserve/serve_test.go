package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// Every test leaves no goroutine behind: the notifier, the SDK's session
// goroutines all end. No goroutine is ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCapabilitiesAdvertisedWhileEmpty(t *testing.T) {
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			f := newFixture(t, newCatalog(t, catalog.Config{}), mcpserve.Options{Name: "cap-test", Version: "9"})
			c := f.connect(tr, "")
			res := c.InitializeResult()
			caps := res.Capabilities
			if caps.Tools == nil || !caps.Tools.ListChanged {
				t.Errorf("tools capability = %+v, want listChanged", caps.Tools)
			}
			if caps.Resources == nil || !caps.Resources.ListChanged {
				t.Errorf("resources capability = %+v, want listChanged", caps.Resources)
			}
			if tr != memory && (res.ServerInfo == nil || res.ServerInfo.Name != "cap-test") {
				t.Errorf("server info = %+v", res.ServerInfo)
			}
			lt, err := c.ListTools(ctxGuard(t), nil)
			if err != nil || lt.Tools == nil || len(lt.Tools) != 0 {
				t.Errorf("tools/list on an empty catalog = %+v, %v; want an empty array", lt, err)
			}
			lr, err := c.ListResources(ctxGuard(t), nil)
			if err != nil || lr.Resources == nil || len(lr.Resources) != 0 {
				t.Errorf("resources/list on an empty catalog = %+v, %v; want an empty array", lr, err)
			}
		})
	}
}

var (
	png1x1 = []byte("\x89PNG\r\n\x1a\n fake")
	wav    = []byte("RIFF....WAVEfmt ")
)

// richCatalog starts tools and resources that exercise every content kind.
func richCatalog(t *testing.T) *catalog.Catalog {
	cat := newCatalog(t, catalog.Config{})
	ctx := context.Background()
	public := bindsec.Plan{Public: true}
	start := func(name string, h catalog.ToolHandler, schema string) {
		k, err := cat.StartTool(ctx, catalog.Tool{Name: name, Title: "T " + name, Description: "D " + name,
			InputSchema: json.RawMessage(schema)}, public, h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	start("echo", func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(c.Arguments, &in); err != nil {
			return catalog.Result{}, err
		}
		r := catalog.TextResult("echo: " + in.Text)
		r.StructuredContent = map[string]any{"text": in.Text}
		return r, nil
	}, `{"type":"object","properties":{"text":{"type":"string"}}}`)
	start("mixed", func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{Content: []catalog.Content{
			{Type: "text", Text: "hello"},
			{Type: "image", Data: png1x1, MIMEType: "image/png"},
			{Type: "audio", Data: wav, MIMEType: "audio/wav"},
			{Type: "resource", Resource: &catalog.Contents{URI: "test://e", MIMEType: "text/plain", Text: "embedded"}},
			{Type: "resource", Resource: &catalog.Contents{URI: "test://b", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2}}},
		}}, nil
	}, "")
	start("fails", func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{}, errors.New("the tool could not do it")
	}, "")
	start("bad-content", func(context.Context, catalog.Call) (catalog.Result, error) {
		return catalog.Result{Content: []catalog.Content{{Type: "hologram"}}}, nil
	}, "")
	readers := map[string]catalog.Contents{
		"test://text":   {MIMEType: "text/plain", Text: "some text"},
		"test://binary": {Blob: png1x1}, // MIME type from the listing
	}
	for uri, contents := range readers {
		k, err := cat.StartResource(ctx, catalog.Resource{URI: uri, Name: uri, Description: "R", MIMEType: "image/png"}, public,
			func(context.Context, catalog.Read) (catalog.Contents, error) { return contents, nil })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	return cat
}

func TestListCallRead(t *testing.T) {
	cat := richCatalog(t)
	for _, tr := range allTransports {
		t.Run(string(tr), func(t *testing.T) {
			f := newFixture(t, cat, mcpserve.Options{})
			c := f.connect(tr, "")
			ctx := ctxGuard(t)

			lt, err := c.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
			}
			if want := []string{"bad-content", "echo", "fails", "mixed"}; !slices.Equal(names, want) {
				t.Fatalf("tools/list = %v, want %v (the catalog's order)", names, want)
			}
			echo := lt.Tools[1]
			if echo.Title != "T echo" || echo.Description != "D echo" {
				t.Errorf("echo listed as %+v", echo)
			}
			if schema, _ := json.Marshal(echo.InputSchema); !bytes.Contains(schema, []byte(`"text"`)) {
				t.Errorf("echo input schema = %s", schema)
			}

			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError || text(t, res) != "echo: hi" {
				t.Fatalf("echo = %+v, %v", res, err)
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"text":"hi"}` {
				t.Errorf("structured content = %s", sc)
			}

			res, err = c.CallTool(ctx, &mcp.CallToolParams{Name: "mixed"})
			if err != nil || res.IsError {
				t.Fatalf("mixed = %+v, %v", res, err)
			}
			var got []catalog.Content
			for _, item := range res.Content {
				cc, err := mcpserve.ContentFromSDK(item)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, cc)
			}
			checkMixed(t, got)

			res, err = c.CallTool(ctx, &mcp.CallToolParams{Name: "fails"})
			if err != nil || !res.IsError || text(t, res) != "the tool could not do it" {
				t.Errorf("a handler error = %+v, %v; want a tool error result with its text", res, err)
			}
			res, err = c.CallTool(ctx, &mcp.CallToolParams{Name: "bad-content"})
			if err != nil || !res.IsError {
				t.Errorf("unsupported content = %+v, %v; want a tool error result", res, err)
			}

			lr, err := c.ListResources(ctx, nil)
			if err != nil || len(lr.Resources) != 2 || lr.Resources[0].URI != "test://binary" || lr.Resources[1].MIMEType != "image/png" {
				t.Fatalf("resources/list = %+v, %v", lr, err)
			}
			rr, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://text"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "some text" || rr.Contents[0].URI != "test://text" ||
				rr.Contents[0].MIMEType != "text/plain" {
				t.Fatalf("read text = %+v, %v", rr, err)
			}
			rr, err = c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://binary"})
			if err != nil || !bytes.Equal(rr.Contents[0].Blob, png1x1) || rr.Contents[0].MIMEType != "image/png" {
				t.Fatalf("read binary = %+v, %v", rr.Contents[0], err)
			}

			_, err = c.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("unknown tool: err = %v, want code -32602", err)
			}
			_, err = c.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nope"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams || rpcData(err)["uri"] != "test://nope" {
				t.Errorf("unknown resource: err = %v, want code -32602 with the uri", err)
			}
			_, err = c.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not-a-cursor"})
			if rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("bad cursor: err = %v, want code -32602", err)
			}
		})
	}
}

func checkMixed(t *testing.T, got []catalog.Content) {
	t.Helper()
	if len(got) != 5 {
		t.Fatalf("mixed returned %d items, want 5", len(got))
	}
	if got[0].Type != "text" || got[0].Text != "hello" {
		t.Errorf("item 0 = %+v", got[0])
	}
	if got[1].Type != "image" || !bytes.Equal(got[1].Data, png1x1) || got[1].MIMEType != "image/png" {
		t.Errorf("item 1 = %+v", got[1])
	}
	if got[2].Type != "audio" || !bytes.Equal(got[2].Data, wav) || got[2].MIMEType != "audio/wav" {
		t.Errorf("item 2 = %+v", got[2])
	}
	if r := got[3].Resource; got[3].Type != "resource" || r == nil || r.URI != "test://e" || r.Text != "embedded" {
		t.Errorf("item 3 = %+v", got[3])
	}
	if r := got[4].Resource; got[4].Type != "resource" || r == nil || !bytes.Equal(r.Blob, []byte{0, 1, 2}) {
		t.Errorf("item 4 = %+v", got[4])
	}
}

func TestContentRoundTrip(t *testing.T) {
	for _, c := range []catalog.Content{
		{Type: "text", Text: "x"},
		{Type: "image", Data: []byte{1}, MIMEType: "image/png"},
		{Type: "audio", Data: []byte{2}, MIMEType: "audio/wav"},
		{Type: "resource", Resource: &catalog.Contents{URI: "a://b", Text: "t"}},
	} {
		sc, err := mcpserve.ContentToSDK(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := mcpserve.ContentFromSDK(sc)
		if err != nil {
			t.Fatal(err)
		}
		if back.Type != c.Type || back.Text != c.Text || !bytes.Equal(back.Data, c.Data) || back.MIMEType != c.MIMEType ||
			(c.Resource != nil && (back.Resource == nil || back.Resource.URI != c.Resource.URI || back.Resource.Text != c.Resource.Text)) {
			t.Errorf("round trip of %+v gave %+v", c, back)
		}
	}
	for _, bad := range []catalog.Content{{Type: "video"}, {Type: "resource"}} {
		if _, err := mcpserve.ContentToSDK(bad); !errors.Is(err, mcpserve.ErrUnsupportedContent) {
			t.Errorf("ContentToSDK(%+v) = %v, want ErrUnsupportedContent", bad, err)
		}
	}
	if _, err := mcpserve.ContentFromSDK(&mcp.ResourceLink{URI: "a://b"}); !errors.Is(err, mcpserve.ErrUnsupportedContent) {
		t.Errorf("ContentFromSDK(resource link) = %v, want ErrUnsupportedContent", err)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := mcpserve.New(nil, mcpserve.Options{}); !errors.Is(err, mcpserve.ErrInvalidOptions) {
		t.Errorf("nil catalog: %v", err)
	}
	cat := newCatalog(t, catalog.Config{})
	for _, o := range []mcpserve.Options{{NotifyWindow: -1}, {PageSize: -1}, {ShutdownTimeout: -1}, {Path: "mcp"}} {
		if _, err := mcpserve.New(cat, o); !errors.Is(err, mcpserve.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// An overloaded route is a protocol error with its own code, and the
// request never waits for room in the waiting room.
func TestOverloaded(t *testing.T) {
	cat := newCatalog(t, catalog.Config{})
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "slow"}, bindsec.Plan{Public: true},
		func(ctx context.Context, _ catalog.Call) (catalog.Result, error) {
			entered <- struct{}{}
			<-release
			return catalog.TextResult("done"), nil
		}, catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	f := newFixture(t, cat, mcpserve.Options{})
	c := f.connect(memoryLegacy, "")

	first := make(chan error, 1)
	go func() { _, err := call(t, c, "slow"); first <- err }()
	wait(t, entered, "the first call to occupy the slot")
	// The slot is taken and the waiting room holds one call: of five more
	// calls, one waits and four are refused at once.
	const more = 5
	results := make(chan error, more)
	for range more {
		go func() { _, err := call(t, c, "slow"); results <- err }()
	}
	for range more - 1 {
		err := <-results
		if rpcCode(err) != mcpserve.CodeOverloaded {
			t.Fatalf("err = %v, want code %d", err, mcpserve.CodeOverloaded)
		}
		if d := rpcData(err); d["reason"] != "overloaded" || d["retryable"] != true {
			t.Errorf("overloaded data = %v", d)
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	if err := <-results; err != nil {
		t.Errorf("queued call: %v", err)
	}
}

func TestDenialTextLeaksNothing(t *testing.T) {
	const secret = "s3cr3t-token-value"
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{secret: bindsec.NewPrincipal("alice")})
	cat := newCatalog(t, catalog.Config{Authenticator: auth})
	k, err := cat.StartTool(context.Background(), catalog.Tool{Name: "admin"}, bindsec.Plan{Roles: []string{"admin"}},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("ran"), nil })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(context.Background()) }()
	f := newFixture(t, cat, mcpserve.Options{})
	c := f.connect(streamable, secret)
	res, err := call(t, c, "admin")
	if err != nil || !res.IsError {
		t.Fatalf("call = %+v, %v; want a denial result", res, err)
	}
	if msg := text(t, res); strings.Contains(msg, secret) || !strings.Contains(msg, "role") {
		t.Errorf("denial text %q: must say a role is missing and must not contain the token", msg)
	}
}
