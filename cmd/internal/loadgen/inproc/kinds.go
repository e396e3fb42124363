package inproc

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// kind is the kind of route a consumer serves.
type kind uint8

const (
	kindTool     kind = iota
	kindPrompt        // StartPrompt, GetPrompt, ListPrompts
	kindTemplate      // StartResourceTemplate, ReadResource, ListResourceTemplates
	kindResource      // StartResource, ReadResource of its fixed URI, ListResources, Consumer.Updated
	numKinds
)

var kindNames = [numKinds]string{"tool", "prompt", "template", "resource"}

func (k kind) String() string { return kindNames[k] }

// kindCap is the catalog's cap on prompts, on templates and on fixed
// resources: a quarter of
// the tool cap, so that the fewer consumers that draw these kinds still
// meet their cap.
func kindCap(cfg Config) int { return max(1, cfg.Cap/4) }

// capOf returns kind k's cap under cfg.
func capOf(cfg Config, k kind) int {
	if k == kindTool {
		return cfg.Cap
	}
	return kindCap(cfg)
}

// newPrompts makes the prompt names, half as many as tool names.
func newPrompts(names int) []*nameState {
	return numbered(max(1, names/2), "lg.prompt-%0*d", kindPrompt)
}

// newResources makes the fixed resources' URIs, half as many as tool
// names. No loadgen template matches them, so that a read of one reaches
// its fixed resource or nothing.
func newResources(names int) []*nameState {
	return numbered(max(1, names/2), "lg://res-%0*d", kindResource)
}

// numbered makes n names of kind k from format, numbered from 0 and
// padded to one width so that they sort in number order.
func numbered(n int, format string, k kind) []*nameState {
	out := make([]*nameState, n)
	width := len(strconv.Itoa(n - 1))
	for i := range out {
		out[i] = &nameState{name: fmt.Sprintf(format, width, i), kind: k}
	}
	return out
}

// tmplGroup is two overlapping template keys under one base: a wide one,
// base{+path}, that matches every URI under the base, and a specific one,
// base item/{id}, that matches the item URIs only and must win them while
// it lives. Each key has two variants that differ only in the variable's
// name, so that starts of both collide as duplicates.
type tmplGroup struct {
	base           string
	wide, specific *nameState
}

// newGroups makes a quarter as many template groups as tool names.
func newGroups(names int) []tmplGroup {
	n := max(1, names/4)
	out := make([]tmplGroup, n)
	width := len(strconv.Itoa(n - 1))
	for i := range out {
		base := fmt.Sprintf("lg://g%0*d/", width, i)
		out[i] = tmplGroup{
			base: base,
			wide: &nameState{name: base + "{+_}", kind: kindTemplate, wide: true, prefix: base,
				variants: []string{base + "{+path}", base + "{+rest}"}},
			specific: &nameState{name: base + "item/{_}", kind: kindTemplate, prefix: base + "item/",
				variants: []string{base + "item/{id}", base + "item/{key}"}},
		}
	}
	return out
}

// varOf returns the name of a loadgen template's one variable.
func varOf(tmpl string) string {
	i, j := strings.LastIndexByte(tmpl, '{'), strings.LastIndexByte(tmpl, '}')
	return strings.TrimLeft(tmpl[i+1:j], "+")
}

// uriFor is the URI that reaches ns's template with a: under a specific
// key, an item URI (which the wide key matches too); under a wide key, a
// URI only it matches.
func uriFor(ns *nameState, a callArgs) string {
	if ns.wide {
		return ns.prefix + "other/" + encodeToken(a)
	}
	return ns.prefix + encodeToken(a)
}

// encodeToken writes callArgs as a URI segment of unreserved characters,
// "s<seq>.<cred>[.p<panic>][.n<probe>]": a templated read carries them in
// its URI, as a call carries them in its arguments.
func encodeToken(a callArgs) string {
	b := make([]byte, 0, 40)
	b = append(b, 's')
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, '.')
	b = append(b, a.Cred...)
	if a.Panic != 0 {
		b = append(b, ".p"...)
		b = strconv.AppendUint(b, a.Panic, 10)
	}
	if a.Probe != 0 {
		b = append(b, ".n"...)
		b = strconv.AppendUint(b, a.Probe, 10)
	}
	return string(b)
}

// decodeToken reads what encodeToken wrote at the end of uri.
func decodeToken(uri string) (callArgs, bool) {
	var a callArgs
	tok := uri[strings.LastIndexByte(uri, '/')+1:]
	for i, part := range strings.Split(tok, ".") {
		if i == 1 {
			a.Cred = part
			continue
		}
		if part == "" {
			return a, false
		}
		n, err := strconv.ParseUint(part[1:], 10, 64)
		if err != nil {
			return a, false
		}
		switch {
		case i == 0 && part[0] == 's':
			a.Seq = n
		case i > 1 && part[0] == 'p':
			a.Panic = n
		case i > 1 && part[0] == 'n':
			a.Probe = n
		default:
			return a, false
		}
	}
	return a, a.Seq != 0
}

// promptArgs carries callArgs as a prompt's string arguments.
func promptArgs(a callArgs) map[string]string {
	m := map[string]string{"seq": strconv.FormatUint(a.Seq, 10), "cred": a.Cred}
	if a.Panic != 0 {
		m["panic"] = strconv.FormatUint(a.Panic, 10)
	}
	if a.Probe != 0 {
		m["probe"] = strconv.FormatUint(a.Probe, 10)
	}
	return m
}

func argsOfPrompt(m map[string]string) callArgs {
	u := func(k string) uint64 { n, _ := strconv.ParseUint(m[k], 10, 64); return n }
	return callArgs{Seq: u("seq"), Cred: m["cred"], Panic: u("panic"), Probe: u("probe")}
}

// promptHandler is a prompt consumer's body: the checks of handler, on a
// prompt get.
func (w *world) promptHandler(rec *record) catalog.PromptHandler {
	return func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		rec.running.Add(1) // invariant 13: from the body's first line to its last
		defer rec.running.Add(-1)
		a := argsOfPrompt(g.Arguments)
		w.bodyChecks(rec, a, g.Principal)
		return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "user", Content: catalog.Content{Type: "text", Text: rec.tag}}}}, nil
	}
}

// reader is a template consumer's body: the checks of handler, and the
// template checker's look at the variables it was given.
func (w *world) reader(rec *record) catalog.ResourceReader {
	return func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		rec.running.Add(1) // invariant 13: from the body's first line to its last
		defer rec.running.Add(-1)
		w.tmpl.varsSeen(rec, r)
		a, ok := decodeToken(r.URI)
		if !ok {
			return catalog.Contents{Text: "loadgen: bad uri"}, nil
		}
		w.bodyChecks(rec, a, r.Principal)
		return catalog.Contents{Text: rec.tag}, nil
	}
}

// argsKey is the context key under which an in-process read of a fixed
// resource carries its callArgs: a fixed URI has no room for them, and
// the catalog hands the reader the caller's context.
type argsKey struct{}

// resourceReader is a fixed-resource consumer's body: the checks of
// handler when the read carries its arguments (an in-process read does),
// and its owner's tag as the contents.
func (w *world) resourceReader(rec *record) catalog.ResourceReader {
	return func(ctx context.Context, r catalog.Read) (catalog.Contents, error) {
		rec.running.Add(1) // invariant 13: from the body's first line to its last
		defer rec.running.Add(-1)
		if a, ok := ctx.Value(argsKey{}).(callArgs); ok {
			w.bodyChecks(rec, a, r.Principal)
		}
		return catalog.Contents{Text: rec.tag}, nil
	}
}

// bodyChecks runs the body-side checks shared by every kind (invariants
// 1, 3 and 8), panics when asked to by id, records a probe nonce, and
// stays inside while the drain probe holds it (invariant 13).
func (w *world) bodyChecks(rec *record, a callArgs, pr bindsec.Principal) {
	w.body.bodyRan(rec, a)
	w.auth.bodyRan(rec, a, pr)
	if a.Panic != 0 && a.Panic == rec.id {
		panic("loadgen: deliberate panic in the route body")
	}
	if a.Probe != 0 {
		rec.probe.Store(a.Probe)
		rec.maybeBlock(a.Probe)
	}
}
