package etcdfleet_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// startSurface starts, on s, a public prompt name (argument "topic") and
// a public template tpl, each with a completer, whose bodies say which
// replica ran them and fail the test if they ever run after their owner
// died.
func (s *served) startSurface(t *testing.T, ctx context.Context, name, tpl string) (*catalog.Consumer, *catalog.Consumer) {
	t.Helper()
	var p, tm *catalog.Consumer
	alive := func(k **catalog.Consumer) {
		select {
		case <-(*k).Done():
			t.Errorf("%s: a body ran after its owner died", s.Name())
		default:
		}
	}
	complete := func(k **catalog.Consumer) catalog.Completer {
		return func(_ context.Context, rq catalog.CompletionRequest) (catalog.Completion, error) {
			alive(k)
			return catalog.Completion{Values: []string{s.Name() + ":" + rq.Argument + ":" + rq.Value}}, nil
		}
	}
	say := sayPrompt(s.Name())
	p, err := s.cat.StartPrompt(ctx, catalog.Prompt{Name: name, Arguments: []catalog.PromptArgument{{Name: "topic", Required: true}}}, bindsec.Plan{Public: true},
		func(ctx context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			alive(&p)
			return say(ctx, g)
		}, catalog.WithCompleter(complete(&p)))
	if err != nil {
		t.Fatal(err)
	}
	s.keep(p)
	read := sayRead(s.Name())
	tm, err = s.cat.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: tpl, Name: name}, bindsec.Plan{Public: true},
		func(ctx context.Context, r catalog.Read) (catalog.Contents, error) {
			alive(&tm)
			return read(ctx, r)
		}, catalog.WithCompleter(complete(&tm)))
	if err != nil {
		t.Fatal(err)
	}
	s.keep(tm)
	return p, tm
}

func getPrompt(ctx context.Context, cs *mcp.ClientSession, name string) (string, error) {
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"topic": "etcd"}})
	if err != nil {
		return "", err
	}
	if len(res.Messages) != 1 {
		return "", nil
	}
	tc, _ := res.Messages[0].Content.(*mcp.TextContent)
	if tc == nil {
		return "", nil
	}
	return tc.Text, nil
}

func readText(ctx context.Context, cs *mcp.ClientSession, uri string) (string, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", err
	}
	if len(res.Contents) != 1 {
		return "", nil
	}
	return res.Contents[0].Text, nil
}

func completeRef(ctx context.Context, cs *mcp.ClientSession, ref *mcp.CompleteReference, arg string) ([]string, error) {
	res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: arg, Value: "x"}})
	if err != nil {
		return nil, err
	}
	return res.Completion.Values, nil
}

// goneOrUnknown reports whether err is the answer for a route whose
// consumer died: route_gone from its holder, or unknown once this
// replica's view has heard.
func goneOrUnknown(err error) bool {
	code, data := wireData(err)
	return code == -32602 && (strings.Contains(data, "route_gone") || strings.Contains(err.Error(), "unknown")) ||
		code == -32002 // resource not found, from the SDK
}

// Three replicas serve one catalog: a client of replica a lists c's prompt
// and template, gets the prompt, reads through the template and completes
// both, each run on c. When c's consumers die, a's answers are route_gone
// or unknown, and a URI that a's own, less specific template also matches
// is then read on a; when c crashes, a's answers are retryable
// CodePeerUnavailable until c's lease expires.
func TestForwardSurfaceAcrossTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a, b, c := newServed(t, ep, "a"), newServed(t, ep, "b"), newServed(t, ep, "c")
	ctx, life := ctxFor(t), lifeFor(t)
	cs, bs := a.client(t), b.client(t)

	kctx, kill := context.WithCancel(life)
	p, tm := c.startSurface(t, kctx, "brief", "notes://c/{id}")
	// a's own template overlaps c's, less specific ("notes://c" is 9
	// literal bytes, "notes://c/" 10).
	a.startSurface(t, life, "brief-a", "notes://c{+rest}")
	waitListed(t, a.cat, "c's prompt and template listed on a", func() bool {
		return promptListed(a.cat, "brief") && templateListed(a.cat, "notes://c/{id}")
	})
	waitListed(t, b.cat, "a's and c's templates listed on b", func() bool {
		return templateListed(b.cat, "notes://c/{id}") && templateListed(b.cat, "notes://c{+rest}")
	})
	if got, err := getPrompt(ctx, cs, "brief"); err != nil || got != "c: etcd" {
		t.Fatalf("prompts/get on a for c's prompt: %q, %v", got, err)
	}
	// The overlap rule: every replica sends a URI to the same template.
	for _, s := range []*mcp.ClientSession{cs, bs} {
		for uri, want := range map[string]string{"notes://c/1": "c read notes://c/1", "notes://cx": "a read notes://cx"} {
			if got, err := readText(ctx, s, uri); err != nil || got != want {
				t.Fatalf("read %s: %q, %v; want %q", uri, got, err, want)
			}
		}
	}
	if got, err := completeRef(ctx, cs, &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"}, "topic"); err != nil || !slices.Equal(got, []string{"c:topic:x"}) {
		t.Fatalf("prompt completion on a for c's prompt: %q, %v", got, err)
	}
	if got, err := completeRef(ctx, cs, &mcp.CompleteReference{Type: "ref/resource", URI: "notes://c/{id}"}, "id"); err != nil || !slices.Equal(got, []string{"c:id:x"}) {
		t.Fatalf("template completion on a for c's template: %q, %v", got, err)
	}

	// c's consumers die: until a's view hears of it, a forwards and c
	// answers route_gone; after, a knows no such prompt, and a's own
	// template reads the URI.
	kill()
	waitDone(t, p)
	waitDone(t, tm)
	for promptListed(a.cat, "brief") || templateListed(a.cat, "notes://c/{id}") {
		if _, err := getPrompt(ctx, cs, "brief"); !goneOrUnknown(err) {
			t.Fatalf("prompts/get after the consumer died: %v", err)
		}
		if _, err := completeRef(ctx, cs, &mcp.CompleteReference{Type: "ref/prompt", Name: "brief"}, "topic"); !goneOrUnknown(err) {
			t.Fatalf("completion after the consumer died: %v", err)
		}
		if got, err := readText(ctx, cs, "notes://c/1"); err != nil && !goneOrUnknown(err) || err == nil && got != "a read notes://c/1" {
			t.Fatalf("read after the consumer died: %q, %v", got, err)
		}
	}
	waitListed(t, a.cat, "c's template gone from a", func() bool { return !templateListed(a.cat, "notes://c/{id}") })
	if _, err := getPrompt(ctx, cs, "brief"); !strings.Contains(errString(err), "unknown prompt") {
		t.Fatalf("prompts/get once a's view heard of the death: %v; want unknown prompt", err)
	}
	if got, err := readText(ctx, cs, "notes://c/1"); err != nil || got != "a read notes://c/1" {
		t.Fatalf("read once c's template is gone: %q, %v; want a's", got, err)
	}

	// c crashes: its claims stand until its lease expires, and a's
	// forwards fail with CodePeerUnavailable, retryable (but perhaps the
	// first: see TestForwardAcrossTheFleet).
	c.startSurface(t, life, "doomed", "doomed://{x}")
	waitListed(t, a.cat, "c's doomed prompt and template listed on a", func() bool {
		return promptListed(a.cat, "doomed") && templateListed(a.cat, "doomed://{x}")
	})
	c.shut()
	c.Crash()
	var retryable int
	for calls := 0; ; calls++ {
		_, perr := getPrompt(ctx, cs, "doomed")
		_, rerr := readText(ctx, cs, "doomed://1")
		_, cerr := completeRef(ctx, cs, &mcp.CompleteReference{Type: "ref/resource", URI: "doomed://{x}"}, "x")
		if !promptListed(a.cat, "doomed") && !templateListed(a.cat, "doomed://{x}") {
			break // c's lease expired, and a's view has heard
		}
		for _, err := range []error{perr, rerr, cerr} {
			code, data := wireData(err)
			switch {
			case code == mcpserve.CodePeerUnavailable && strings.Contains(data, `"retryable":true`):
				retryable++
			case code == mcpserve.CodePeerUnavailable && calls == 0:
			case goneOrUnknown(err) && (!promptListed(a.cat, "doomed") || !templateListed(a.cat, "doomed://{x}")):
				// The lease expired between the request and the check.
			default:
				t.Fatalf("request %d for a crashed replica's route: %v (%s); want a retryable CodePeerUnavailable", calls, err, data)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if retryable == 0 {
		t.Fatal("no retryable answer while the crashed replica's claims stood")
	}
	if _, err := getPrompt(ctx, cs, "doomed"); !strings.Contains(errString(err), "unknown prompt") {
		t.Fatalf("prompts/get once c's lease expired: %v; want unknown prompt", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
