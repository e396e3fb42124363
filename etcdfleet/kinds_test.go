package etcdfleet_test

import (
	"context"
	"errors"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

func prompt(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
	return catalog.PromptResult{}, nil
}

func reader(context.Context, catalog.Read) (catalog.Contents, error) {
	return catalog.Contents{Text: "x"}, nil
}

// Prompts and resource templates are claimed fleet-wide too: a name (or a
// template, up to its variables' names) that a live owner holds on one
// replica is refused on another, and is free there once it stops. They
// are not listed as tools or resources on the other replicas.
func TestPromptsAndTemplatesClaimedFleetWide(t *testing.T) {
	ep := startEtcd(t)
	a, b := newReplica(t, ep, "a"), newReplica(t, ep, "b")
	ctx, life := ctxFor(t), lifeFor(t)
	public := bindsec.Plan{Public: true}

	p, err := a.cat.StartPrompt(life, catalog.Prompt{Name: "greet"}, public, prompt)
	if err != nil {
		t.Fatalf("a: start prompt: %v", err)
	}
	a.keep(p)
	tp, err := a.cat.StartResourceTemplate(life, catalog.ResourceTemplate{URITemplate: "fs://{dir}/x", Name: "x"}, public, reader)
	if err != nil {
		t.Fatalf("a: start template: %v", err)
	}
	a.keep(tp)

	if _, err := b.cat.StartPrompt(life, catalog.Prompt{Name: "greet"}, public, prompt); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("b: start prompt held on a: %v, want ErrDuplicate", err)
	}
	if _, err := b.cat.StartResourceTemplate(life, catalog.ResourceTemplate{URITemplate: "fs://{other}/x", Name: "x"}, public, reader); !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("b: start template held on a (other variable name): %v, want ErrDuplicate", err)
	}
	if n, m := len(b.cat.Tools().List()), len(b.cat.Resources().List()); n != 0 || m != 0 {
		t.Fatalf("b lists %d tools and %d resources for a's prompt and template", n, m)
	}

	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	p2, err := b.cat.StartPrompt(life, catalog.Prompt{Name: "greet"}, public, prompt)
	if err != nil {
		t.Fatalf("b: start prompt after a stopped it: %v", err)
	}
	b.keep(p2)
	tp2, err := b.cat.StartResourceTemplate(life, catalog.ResourceTemplate{URITemplate: "fs://{other}/x", Name: "x"}, public, reader)
	if err != nil {
		t.Fatalf("b: start template after a stopped it: %v", err)
	}
	b.keep(tp2)
}
