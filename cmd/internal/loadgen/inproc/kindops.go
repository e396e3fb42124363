package inproc

import (
	"context"
	"errors"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
)

// startRoute starts rec's consumer on ns by ns's kind.
func (w *world) startRoute(ctx context.Context, ns *nameState, rec *record) (Consumer, error) {
	desc := "loadgen consumer " + rec.tag
	switch ns.kind {
	case kindPrompt:
		return w.sys.StartPrompt(ctx, catalog.Prompt{Name: ns.name, Title: rec.tag, Description: desc,
			Arguments: []catalog.PromptArgument{{Name: "seq", Required: true}, {Name: "cred"}}}, bearer.Plan(rec.public), w.promptHandler(rec))
	case kindTemplate:
		rec.tmpl = ns.variants[rec.id%uint64(len(ns.variants))]
		rec.varName = varOf(rec.tmpl)
		return w.sys.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: rec.tmpl, Name: "loadgen", Title: rec.tag, Description: desc},
			bearer.Plan(rec.public), w.reader(rec))
	case kindResource:
		// A resource has no title: its name carries the owner's tag.
		return w.sys.StartResource(ctx, catalog.Resource{URI: ns.name, Name: rec.tag, Description: desc}, bearer.Plan(rec.public), w.resourceReader(rec))
	}
	return w.sys.StartTool(ctx, catalog.Tool{Name: ns.name, Title: rec.tag, Description: desc, TaskSupport: catalog.TaskOptional}, bearer.Plan(rec.public), w.handler(rec))
}

// invoke runs one operation on ns's route with a: a tool call, a prompt
// get, a read of the URI that reaches ns's template (uriFor), or a read of
// ns's fixed resource, a carrying the context (argsKey). It
// returns the tag of the body that answered.
func (w *world) invoke(ctx context.Context, ns *nameState, a callArgs, cred credClass) (string, error) {
	switch ns.kind {
	case kindPrompt:
		res, err := w.sys.GetPrompt(ctx, ns.name, promptArgs(a), cred.token())
		if err != nil || len(res.Messages) == 0 {
			return "", err
		}
		return res.Messages[0].Content.Text, nil
	case kindTemplate:
		res, err := w.sys.ReadResource(ctx, uriFor(ns, a), cred.token())
		return res.Text, err
	case kindResource:
		res, err := w.sys.ReadResource(context.WithValue(ctx, argsKey{}, a), ns.name, cred.token())
		return res.Text, err
	}
	res, err := w.sys.CallTool(ctx, ns.name, encodeArgs(a.Seq, cred, a.Panic, a.Probe), cred.token())
	return resultText(res), err
}

// invokeRetry is callRetry for every kind.
func (w *world) invokeRetry(ctx context.Context, ns *nameState, a callArgs, cred credClass) (string, error) {
	deadline := time.Now().Add(overloadPatience)
	for backoff := 50 * time.Microsecond; ; {
		text, err := w.invoke(ctx, ns, a, cred)
		if !errors.Is(err, catalog.ErrOverloaded) || ctx.Err() != nil || time.Now().After(deadline) {
			return text, err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Millisecond)
	}
}

// listKind lists the routes of kind k, as name and title (the owner's tag).
func (w *world) listKind(k kind) []listedEntry {
	var out []listedEntry
	switch k {
	case kindPrompt:
		for _, p := range w.sys.ListPrompts() {
			out = append(out, listedEntry{p.Name, p.Title})
		}
	case kindTemplate:
		for _, t := range w.sys.ListResourceTemplates() {
			out = append(out, listedEntry{t.URITemplate, t.Title})
		}
	case kindResource:
		for _, r := range w.sys.ListResources() {
			out = append(out, listedEntry{r.URI, r.Name})
		}
	default:
		for _, t := range w.sys.ListTools() {
			out = append(out, listedEntry{t.Name, t.Title})
		}
	}
	return out
}

// listOf lists kind k and checks the listing (invariants 5, 15 and 16).
func (w *world) listOf(k kind, l *latencies) {
	if k == kindTool {
		w.list(l)
		return
	}
	var buf [16]*record
	dead := w.lists.deadBefore(w.namesOf(k), buf[:0])
	begin := w.tick()
	t0 := time.Now()
	entries := w.listKind(k)
	l.Record(opList, time.Since(t0))
	if n := w.dead.listedEntries(begin, entries); n > 0 {
		w.unchecked.Add(int64(n))
	}
	w.lists.listed(dead, entries)
}

// getPrompt gets ns's prompt, or reads ns's fixed resource, and runs the
// checks a call runs.
func (w *world) getPrompt(ctx context.Context, ns *nameState, cred credClass, l *latencies) outcome {
	s := callSnapshot{ns: ns, starts: ns.starts.Load()}
	s.holder = ns.holder.Load()
	s.begin = w.tick()
	t0 := time.Now()
	text, err := w.invoke(ctx, ns, callArgs{Seq: s.begin, Cred: cred.String()}, cred)
	what, timed := "get prompt", opGet
	if ns.kind == kindResource {
		what, timed = "read", opRead
	}
	l.Record(timed, time.Since(t0))
	return w.ended(s, err, text, what)
}

// ended runs the caller-side checks of a prompt get or resource read.
func (w *world) ended(s callSnapshot, err error, text, what string) outcome {
	ns := s.ns
	o := classify(err)
	w.kindOutcomes[ns.kind][o].Add(1)
	w.dead.callEnded(s, o)
	w.dead.oneWinner(s, o, text)
	if o == outcomeOther || o == outcomePanicked {
		w.t.Unexpected("%s %s: %v", what, ns.name, err)
	}
	return o
}

// templateRead is one read under a template group, with the snapshots
// taken before it was sent, which judge it once it ends.
type templateRead struct {
	ns         *nameState // the template the URI was made for
	item       bool       // an item URI, which both templates match
	args       callArgs
	wide, spec callSnapshot
}

// beginTemplateRead snapshots g's templates and ticks the clock for a
// read of an item URI (item) or of one only the wide template matches.
func (w *world) beginTemplateRead(g tmplGroup, item bool, cred credClass) templateRead {
	r := templateRead{ns: g.wide, item: item}
	if item {
		r.ns = g.specific
	}
	r.wide = callSnapshot{ns: g.wide, starts: g.wide.starts.Load()}
	r.wide.holder = g.wide.holder.Load()
	r.spec = callSnapshot{ns: g.specific, starts: g.specific.starts.Load()}
	r.spec.holder = g.specific.holder.Load()
	begin := w.tick()
	r.wide.begin, r.spec.begin = begin, begin
	r.args = callArgs{Seq: begin, Cred: cred.String()}
	return r
}

// endTemplateRead judges a read that ended with o and text: which
// template served it, and that a dead owner's did not.
func (w *world) endTemplateRead(r templateRead, o outcome, text string) {
	if r.item {
		w.tmpl.readEnded(r.spec, r.wide, o, text)
	} else {
		w.dead.callEnded(r.wide, o)
		w.dead.oneWinner(r.wide, o, text)
	}
}

// readTemplate reads a URI under g: an item URI, which both of g's
// templates match, or one only the wide template matches.
func (w *world) readTemplate(ctx context.Context, g tmplGroup, item bool, cred credClass, l *latencies) outcome {
	r := w.beginTemplateRead(g, item, cred)
	t0 := time.Now()
	text, err := w.invoke(ctx, r.ns, r.args, cred)
	l.Record(opRead, time.Since(t0))
	o := classify(err)
	w.kindOutcomes[kindTemplate][o].Add(1)
	w.endTemplateRead(r, o, text)
	if o == outcomeOther || o == outcomePanicked {
		w.t.Unexpected("read %s: %v", uriFor(r.ns, r.args), err)
	}
	return o
}
