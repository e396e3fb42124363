package inproc

import (
	"context"
	"fmt"
	"regexp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/yosida95/uritemplate/v3"
)

// The fake's prompts and resource templates: the same entries, plans,
// slots and faults as its tools, under keys of their own (mapKey).

func (f *fakeSystem) StartPrompt(ctx context.Context, pr catalog.Prompt, p bindsec.Plan, h catalog.PromptHandler) (Consumer, error) {
	return f.start(ctx, &fakeEntry{kind: kindPrompt, key: pr.Name, prompt: pr, ph: h}, p)
}

// fakeVar is a template expression; fakeTemplateKey names every variable
// "_", as the catalog's keys do.
var fakeVar = regexp.MustCompile(`\{([+#./;?&]?)[^}]*\}`)

func (f *fakeSystem) StartResourceTemplate(ctx context.Context, t catalog.ResourceTemplate, p bindsec.Plan, rd catalog.ResourceReader) (Consumer, error) {
	m, err := uritemplate.New(t.URITemplate)
	if err != nil {
		return nil, fmt.Errorf("fake: template %q: %w: %v", t.URITemplate, catalog.ErrInvalidName, err)
	}
	key := fakeVar.ReplaceAllString(t.URITemplate, "{${1}_}")
	if f.has(bugVarNamesDistinct) {
		key = t.URITemplate
	}
	literal := len(fakeVar.ReplaceAllString(t.URITemplate, ""))
	return f.start(ctx, &fakeEntry{kind: kindTemplate, key: key, tpl: t, rd: rd, match: m, literal: literal}, p)
}

// mapKey is an entry's key in the fake's maps: tools by name, so that the
// tool scenarios read as they always did, the other kinds prefixed.
func mapKey(k kind, key string) string {
	if k == kindTool {
		return key
	}
	return k.String() + "\x00" + key
}

func (f *fakeSystem) GetPrompt(ctx context.Context, name string, args map[string]string, credential string) (res catalog.PromptResult, err error) {
	err = f.dispatch(ctx, mapKey(kindPrompt, name), credential, catalog.ErrNotFound, func(e *fakeEntry, pr bindsec.Principal) (err error) {
		res, err = e.ph(ctx, catalog.PromptGet{Name: name, Arguments: args, Principal: pr, Owner: e.ref})
		return err
	})
	return res, err
}

// ReadResource reads uri's fixed resource if one is held, else uri with the
// most specific live template that matches it.
func (f *fakeSystem) ReadResource(ctx context.Context, uri, credential string) (res catalog.Contents, err error) {
	f.mu.Lock()
	if _, ok := f.entries[mapKey(kindResource, uri)]; ok {
		f.mu.Unlock()
		err = f.dispatch(ctx, mapKey(kindResource, uri), credential, catalog.ErrNotFound, func(e *fakeEntry, pr bindsec.Principal) (err error) {
			res, err = e.rd(ctx, catalog.Read{URI: uri, Principal: pr, Owner: e.ref})
			return err
		})
		return res, err
	}
	var best *fakeEntry
	for _, e := range f.entries {
		if e.kind != kindTemplate || e.closed || (!e.ref.Alive() && !f.has(bugMatchDead|bugRunDeadBodies|bugGoneForDead)) {
			continue
		}
		if e.match.Match(uri) == nil {
			continue
		}
		better := best == nil || e.literal > best.literal || e.literal == best.literal && e.tpl.URITemplate < best.tpl.URITemplate
		if best != nil && f.has(bugLessSpecific) {
			better = e.literal < best.literal
		}
		if better {
			best = e
		}
	}
	f.mu.Unlock()
	if best == nil {
		return res, fmt.Errorf("fake: %w %q", catalog.ErrNotFound, uri)
	}
	// The key's entry may have changed hands since the match, to a variant
	// with other variable names: the variables are the entry's own.
	err = f.dispatch(ctx, mapKey(kindTemplate, best.key), credential, catalog.ErrNotFound, func(e *fakeEntry, pr bindsec.Principal) (err error) {
		vars := map[string]string{}
		for name, v := range e.match.Match(uri) {
			if f.has(bugWrongVars) {
				name = "_"
			}
			vars[name] = v.String()
		}
		res, err = e.rd(ctx, catalog.Read{URI: uri, Vars: vars, Principal: pr, Owner: e.ref})
		return err
	})
	return res, err
}

func (f *fakeSystem) ListPrompts() []catalog.Prompt {
	var out []catalog.Prompt
	for _, e := range f.list(kindPrompt) {
		out = append(out, e.prompt)
	}
	return out
}

func (f *fakeSystem) ListResourceTemplates() []catalog.ResourceTemplate {
	var out []catalog.ResourceTemplate
	for _, e := range f.list(kindTemplate) {
		out = append(out, e.tpl)
	}
	return out
}

func (f *fakeSystem) StartResource(ctx context.Context, r catalog.Resource, p bindsec.Plan, rd catalog.ResourceReader) (Consumer, error) {
	return f.start(ctx, &fakeEntry{kind: kindResource, key: r.URI, res: r, rd: rd}, p)
}

func (f *fakeSystem) ListResources() []catalog.Resource {
	var out []catalog.Resource
	for _, e := range f.list(kindResource) {
		out = append(out, e.res)
	}
	return out
}

func (f *fakeSystem) OnResourceUpdated(fn func(uri string)) (cancel func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.nextListener
	f.nextListener++
	f.listeners[id] = fn
	return func() {
		f.mu.Lock()
		delete(f.listeners, id)
		f.mu.Unlock()
	}
}

// Updated publishes as the catalog does: only while k lives, its Stop not
// begun, and its entry still holds the URI; the listeners run on the
// caller's goroutine before it returns.
func (k *fakeConsumer) Updated() error {
	f := k.f
	if k.e.kind != kindResource {
		return fmt.Errorf("fake: %q: %w", k.name, catalog.ErrInvalidRoute)
	}
	f.mu.Lock()
	holds := f.entries[k.name] == k.e && k.e.ref.Alive() && !k.e.closed
	fns := make([]func(string), 0, len(f.listeners))
	for _, fn := range f.listeners {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	if !holds && !f.has(bugUpdateDead) {
		return fmt.Errorf("fake: %q: %w", k.name, catalog.ErrDeadOwner)
	}
	if f.has(bugUpdateDropped) {
		return nil
	}
	for _, fn := range fns {
		fn(k.e.key)
	}
	return nil
}
