package etcdfleet_test

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// listed reports whether c's catalog lists tool name.
func listed(c *catalog.Catalog, name string) bool {
	return slices.ContainsFunc(c.Tools().List(), func(t catalog.Tool) bool { return t.Name == name })
}

// waitListed waits, within patience, until cond holds for c's listing,
// waking on the catalog's Changes: a remote change must close them.
func waitListed(t *testing.T, c *catalog.Catalog, what string, cond func() bool) {
	t.Helper()
	waitListedWithin(t, c, patience, what, cond)
}

// waitListedWithin is waitListed within d: promptly, for a listing that
// must follow from a change the replica's view has already applied.
func waitListedWithin(t *testing.T, c *catalog.Catalog, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		ch := c.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("catalog: %s: not after %v; tools %v", what, d, c.Tools().List())
		}
	}
}

// Each replica's catalog lists the fleet's routes, and its Changes and
// ToolsVersion move when a consumer on another replica starts or dies, by
// any path.
func TestCatalogListsTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)

	b.mustStart(t, life, "mine")
	stopped := a.mustStart(t, life, "stopped")
	cctx, cancel := context.WithCancel(life)
	a.mustStart(t, cctx, "cancelled")
	waitListed(t, b.cat, "a's tools listed on b", func() bool {
		return listed(b.cat, "stopped") && listed(b.cat, "cancelled") && listed(b.cat, "mine")
	})
	if got := b.cat.Tools().List(); !slices.IsSortedFunc(got, func(x, y catalog.Tool) int { return cmp.Compare(x.Name, y.Name) }) {
		t.Fatalf("b's listing is not sorted: %v", got)
	}
	waitListed(t, a.cat, "b's tool listed on a", func() bool { return listed(a.cat, "mine") })

	// A delete reaches b's view from etcd in its own time (patience); once
	// the view has applied it, the catalog follows at once (promptly): a
	// delete that did not move the view's version leaves the catalog's
	// merged listing as it was.
	v := b.cat.Tools().Version()
	if err := stopped.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitView(t, b.View(), "a's stopped tool gone from b's view", func() bool { return !viewHas(b.View(), "stopped") })
	waitListedWithin(t, b.cat, promptly, "a's stopped tool gone from b", func() bool { return !listed(b.cat, "stopped") })
	cancel()
	waitView(t, b.View(), "a's cancelled tool gone from b's view", func() bool { return !viewHas(b.View(), "cancelled") })
	waitListedWithin(t, b.cat, promptly, "a's cancelled tool gone from b", func() bool { return !listed(b.cat, "cancelled") })
	if b.cat.Tools().Version() <= v {
		t.Fatalf("b's tools version did not move: %d, then %d", v, b.cat.Tools().Version())
	}

	a.mustStart(t, life, "crashed")
	waitListed(t, b.cat, "crashed listed", func() bool { return listed(b.cat, "crashed") })
	a.Crash()
	waitListed(t, b.cat, "a crashed: its tool expired from b", func() bool { return !listed(b.cat, "crashed") })
	if !listed(b.cat, "mine") {
		t.Fatal("b's own tool left its listing")
	}
}

// A client of replica b's MCP server lists a's tool and hears
// tools/list_changed when a's consumer dies.
func TestServerNotifiesRemoteDeath(t *testing.T) {
	ep := startEtcd(t)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)

	srv, err := mcpserve.New(b.cat, mcpserve.Options{NotifyWindow: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	changed := make(chan struct{}, 64)
	cl := mcp.NewClient(&mcp.Implementation{Name: "fleet-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := cl.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	cctx, cancel := context.WithCancel(life)
	a.mustStart(t, cctx, "remote")
	waitListed(t, b.cat, "remote listed on b", func() bool { return listed(b.cat, "remote") })
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "remote" }) {
		t.Fatalf("tools/list on b lacks a's tool: %v", res.Tools)
	}
	drain(changed)

	// The death reaches b's view from etcd in its own time (patience); the
	// catalog's version moves with the view, and the notification follows
	// within its window (promptly).
	v := b.cat.Tools().Version()
	cancel()
	waitView(t, b.View(), "a's dead tool gone from b's view", func() bool { return !viewHas(b.View(), "remote") })
	waitListedWithin(t, b.cat, promptly, "b's tools version moved with the remote delete", func() bool { return b.cat.Tools().Version() > v })
	select {
	case <-changed:
	case <-time.After(promptly):
		t.Fatalf("no tools/list_changed on b within %v of the delete reaching its view", promptly)
	}
	waitListedWithin(t, b.cat, promptly, "remote gone from b", func() bool { return !listed(b.cat, "remote") })
	res, err = cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "remote" }) {
		t.Fatalf("tools/list on b still lists a's dead tool")
	}
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// promptListed and templateListed report whether c's catalog lists the
// prompt name or the URI template tpl.
func promptListed(c *catalog.Catalog, name string) bool {
	return slices.ContainsFunc(c.Prompts().List(), func(p catalog.Prompt) bool { return p.Name == name })
}

func templateListed(c *catalog.Catalog, tpl string) bool {
	return slices.ContainsFunc(c.Templates().List(), func(t catalog.ResourceTemplate) bool { return t.URITemplate == tpl })
}

// A prompt and a template started on one replica are listed on another,
// as their consumer describes them, and leave its listings when their
// consumers stop; their versions and the catalog's Changes move.
func TestCatalogListsFleetPromptsAndTemplates(t *testing.T) {
	ep := startEtcd(t)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	pv, tv := a.cat.Prompts().Version(), a.cat.Templates().Version()

	p, err := b.cat.StartPrompt(life, catalog.Prompt{Name: "brief", Title: "Brief", Description: "d",
		Arguments: []catalog.PromptArgument{{Name: "topic", Description: "what", Required: true}}}, bindsec.Plan{Public: true}, sayPrompt("b"))
	if err != nil {
		t.Fatal(err)
	}
	b.keep(p)
	tm, err := b.cat.StartResourceTemplate(life, catalog.ResourceTemplate{URITemplate: "notes://b/{id}", Name: "notes", MIMEType: "text/plain"},
		bindsec.Plan{Public: true}, sayRead("b"))
	if err != nil {
		t.Fatal(err)
	}
	b.keep(tm)
	waitListed(t, a.cat, "b's prompt and template listed on a", func() bool {
		return promptListed(a.cat, "brief") && templateListed(a.cat, "notes://b/{id}")
	})
	if got := a.cat.Prompts().List(); !reflect.DeepEqual(got, b.cat.Prompts().List()) {
		t.Errorf("a lists the prompt as %+v; b as %+v", got, b.cat.Prompts().List())
	}
	if got := a.cat.Templates().List(); len(got) != 1 || got[0].Name != "notes" || got[0].MIMEType != "text/plain" {
		t.Errorf("a lists the templates %+v", got)
	}
	if a.cat.Prompts().Version() <= pv || a.cat.Templates().Version() <= tv {
		t.Errorf("versions did not move: prompts %d then %d, templates %d then %d", pv, a.cat.Prompts().Version(), tv, a.cat.Templates().Version())
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tm.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitListed(t, a.cat, "b's prompt and template gone from a", func() bool {
		return !promptListed(a.cat, "brief") && !templateListed(a.cat, "notes://b/{id}")
	})
}

// sayPrompt is a prompt handler that says which replica ran it, and
// with what topic.
func sayPrompt(replica string) catalog.PromptHandler {
	return func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Description: "from " + replica, Messages: []catalog.PromptMessage{
			{Role: "user", Content: catalog.Content{Type: catalog.TypeText, Text: replica + ": " + g.Arguments["topic"]}},
		}}, nil
	}
}

// sayRead is a template reader that says which replica read the URI.
func sayRead(replica string) catalog.ResourceReader {
	return func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: replica + " read " + r.URI}, nil
	}
}
