package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// The fleet's other kinds of route: prompts, resource templates and fixed
// resources. Surface consumers start them on random replicas, on names
// from small pools shared by the fleet (so starts collide across
// replicas as tools' do), and end them by the same four shapes. Resolvers
// get the prompts and read the templates through random replicas, which
// forward to the holder; the fixed resources publish updates, which
// subscribers on other replicas hear (subs.go).

// surfKind is a kind of route other than a tool.
type surfKind int

const (
	surfPrompt surfKind = iota
	surfTemplate
	surfResource
	numSurfKinds
)

var surfKindNames = [numSurfKinds]string{"prompt", "template", "resource"}

func (k surfKind) String() string { return surfKindNames[k] }

// catalogKind is the kind's name in claims and Peer lookups.
func (k surfKind) catalogKind() catalog.Kind {
	return [numSurfKinds]catalog.Kind{catalog.KindPrompt, catalog.KindTemplate, catalog.KindResource}[k]
}

// surfacePool is how many names each kind's pool holds: few, so that
// starts collide across replicas.
const surfacePool = 3

// surfName is one name of a surface pool. ns.name is what the catalog
// registers and the fleet claims: the prompt's name, the template's key,
// the resource's URI. raw is the URI template of a template.
type surfName struct {
	ns   *nameState
	kind surfKind
	raw  string
}

// templateURI is the URI template of pool entry i: every read carries
// its credential, clock reading and the replica it was sent to, as a
// call's arguments do, so that the reader can judge it.
func templateURI(i int) string { return "fltpl" + strconv.Itoa(i) + "://x/{cred}/{seq}/{via}{?panic}" }

// newSurface makes the surface pools; their names join byName, so that
// the forward checks find their consumers as they find tools'.
func (w *world) newSurface() {
	for i := range surfacePool {
		w.surf = append(w.surf, &surfName{ns: &nameState{name: "flprompt-" + strconv.Itoa(i)}, kind: surfPrompt})
		raw := templateURI(i)
		key, err := catalog.TemplateKey(raw)
		if err != nil {
			panic(err) // the pool's own templates: a bug here
		}
		w.surf = append(w.surf, &surfName{ns: &nameState{name: key}, kind: surfTemplate, raw: raw})
		w.surf = append(w.surf, &surfName{ns: &nameState{name: "flres://r" + strconv.Itoa(i)}, kind: surfResource})
	}
	for _, sn := range w.surf {
		w.byName[sn.ns.name] = sn.ns
	}
}

// pickSurf returns a random pool entry of kind k.
func (w *world) pickSurf(rng *rand.Rand, k surfKind) *surfName {
	return w.surf[rng.IntN(surfacePool)*int(numSurfKinds)+int(k)]
}

// surfHeld is a started surface consumer: held, and the flag that makes
// a fixed resource's reader panic (a read carries no arguments).
type surfHeld struct {
	*held
	sn    *surfName
	panic *atomic.Bool
}

// startSurface starts a consumer of sn on r, as start does a tool's.
func (w *world) startSurface(r *replica, sn *surfName, public bool) (*surfHeld, error) {
	rec := w.newRecord(sn.ns.name, r, public)
	life, cancel := context.WithCancel(context.Background())
	lost, before := r.rep.SessionsLost(), r.rep.Lease()
	plan := bearer.Plan(public)
	pf := new(atomic.Bool)
	var k *catalog.Consumer
	var err error
	switch sn.kind {
	case surfPrompt:
		k, err = r.cat.StartPrompt(life, catalog.Prompt{Name: sn.ns.name, Title: rec.tag, Description: "fleet loadgen prompt",
			Arguments: []catalog.PromptArgument{{Name: "seq"}, {Name: "via"}, {Name: "cred"}, {Name: "panic"}}}, plan, w.promptHandler(rec))
	case surfTemplate:
		k, err = r.cat.StartResourceTemplate(life, catalog.ResourceTemplate{URITemplate: sn.raw, Name: rec.tag, Title: rec.tag,
			Description: "fleet loadgen template", MIMEType: "text/plain"}, plan, w.readHandler(rec, nil))
	case surfResource:
		k, err = r.cat.StartResource(life, catalog.Resource{URI: sn.ns.name, Name: rec.tag, Description: "fleet loadgen resource", MIMEType: "text/plain"},
			plan, w.readHandler(rec, pf))
	}
	w.surfStarts[sn.kind].Add(1)
	if err != nil {
		cancel()
		w.recs.Delete(rec.tag)
		switch {
		case errors.Is(err, catalog.ErrDuplicate):
		case errors.Is(err, etcdfleet.ErrSessionLost), errors.Is(err, etcdfleet.ErrUnavailable), errors.Is(err, etcdfleet.ErrClosed):
		case r.crashed.Load():
		default:
			w.t.Unexpected("start %s %s on %s: %v", sn.kind, sn.ns.name, r.name, err)
		}
		return nil, err
	}
	rec.done, rec.owner = k.Done(), k.Owner().ID()
	if after := r.rep.Lease(); after == before && before != 0 {
		rec.lease.Store(int64(before))
	}
	rec.won.Store(true)
	w.surfClaims[sn.kind].Add(1)
	ns := sn.ns
	ns.mu.Lock()
	others := ns.winners[:0]
	for _, o := range ns.winners {
		if o.alive() && !o.stopping.Load() {
			others = append(others, o)
		}
	}
	ns.winners = append(others, rec)
	ns.mu.Unlock()
	return &surfHeld{held: &held{k: k, rec: rec, cancel: cancel, lost: lost}, sn: sn, panic: pf}, nil
}

// promptHandler is rec's prompt body: the body-side checks, a panic when
// asked, and its owner's tag as the one message.
func (w *world) promptHandler(rec *record) catalog.PromptHandler {
	return func(ctx context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		a := callArgs{Cred: g.Arguments["cred"]}
		a.Seq, _ = strconv.ParseUint(g.Arguments["seq"], 10, 64)
		a.Via, _ = strconv.Atoi(g.Arguments["via"])
		w.body.bodyRan(rec, a, g.Principal)
		if p, _ := strconv.ParseUint(g.Arguments["panic"], 10, 64); p != 0 && p == rec.id {
			panic("fleetload: deliberate panic in the prompt body")
		}
		return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "user", Content: catalog.Content{Type: catalog.TypeText, Text: rec.tag}}}}, nil
	}
}

// readHandler is rec's reader: for a template, the body-side checks on
// the variables its URI carries; a panic when asked (a template's
// ?panic, a fixed resource's flag); its owner's tag as the text.
func (w *world) readHandler(rec *record, pf *atomic.Bool) catalog.ResourceReader {
	return func(ctx context.Context, rd catalog.Read) (catalog.Contents, error) {
		if rd.Vars != nil {
			a := callArgs{Cred: rd.Vars["cred"]}
			a.Seq, _ = strconv.ParseUint(rd.Vars["seq"], 10, 64)
			a.Via, _ = strconv.Atoi(rd.Vars["via"])
			w.body.bodyRan(rec, a, rd.Principal)
			if p, _ := strconv.ParseUint(rd.Vars["panic"], 10, 64); p != 0 && p == rec.id {
				panic("fleetload: deliberate panic in the template reader")
			}
		}
		if pf != nil && pf.Load() {
			panic("fleetload: deliberate panic in the resource reader")
		}
		return catalog.Contents{URI: rd.URI, MIMEType: "text/plain", Text: rec.tag}, nil
	}
}

// surfaceConsumer starts surface consumers of random kinds on random
// replicas and ends them by the four shapes until churn stops; the one
// it holds then survives. A fixed resource publishes updates while held
// (subs.go).
func (w *world) surfaceConsumer(index int) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(4000+index)))
	var carry *surfHeld
	for {
		h := carry
		carry = nil
		if h == nil {
			if w.pausing.Load() {
				return
			}
			r := w.f.pick(rng)
			if r == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			var err error
			if h, err = w.startSurface(r, w.pickSurf(rng, surfKind(rng.IntN(int(numSurfKinds)))), rng.IntN(2) == 0); err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
		}
		longest := w.cfg.Hold
		if rng.IntN(10) == 0 {
			longest = max(longest, 3*w.cfg.TTL)
		}
		switch w.holdSurface(h, time.Duration(rng.Int64N(int64(longest)+1))) {
		case holdDied:
			w.diedAlone(h.held)
			continue
		case holdPaused:
			w.survMu.Lock()
			w.survivor = append(w.survivor, h.held)
			w.survMu.Unlock()
			return
		}
		if h.rec.rep.crashed.Load() {
			w.abandon(h.held)
			continue
		}
		sh := shape(rng.IntN(4))
		w.endSurface(h, sh)
		if (sh == shapeCancel || sh == shapePanic) && h.k != nil && rng.IntN(2) == 0 && !w.pausing.Load() {
			if r := w.f.pick(rng); r != nil {
				succ, _ := w.startSurface(r, h.sn, rng.IntN(2) == 0)
				w.lateStop(h.held)
				carry = succ
				continue
			}
		}
		h.k = nil
	}
}

// How a hold ended.
const (
	holdDone   = iota // its time was up
	holdDied          // its owner died with nobody ending it
	holdPaused        // churn stopped
)

// holdSurface keeps h for d; a fixed resource publishes an update every
// few milliseconds meanwhile.
func (w *world) holdSurface(h *surfHeld, d time.Duration) int {
	hold := time.NewTimer(d)
	defer hold.Stop()
	var tick <-chan time.Time
	if h.sn.kind == surfResource {
		t := time.NewTicker(publishEvery)
		defer t.Stop()
		tick = t.C
		w.subs.publish(h.rec, h.k)
	}
	for {
		select {
		case <-h.rec.done:
			return holdDied
		case <-w.pause:
			return holdPaused
		case <-hold.C:
			return holdDone
		case <-tick:
			w.subs.publish(h.rec, h.k)
		}
	}
}

// endSurface ends h by sh, as end does a tool: the panic is asked of the
// kind's own body, on the consumer's replica. A fixed resource, its death
// observed, publishes once more, which must fail; a dropped one cannot,
// since a handle kept for it would keep it alive.
func (w *world) endSurface(h *surfHeld, sh shape) {
	if sh == shapeDrop {
		w.end(h.held, sh)
		return
	}
	if h.sn.kind == surfResource {
		defer w.subs.latePublish(h.rec, h.k)
	}
	if sh != shapePanic {
		w.end(h.held, sh)
		return
	}
	rec := h.rec
	id := strconv.FormatUint(rec.id, 10)
	var err error
	switch h.sn.kind {
	case surfPrompt:
		_, err = rec.rep.cat.GetPrompt(context.Background(), rec.name, map[string]string{"cred": credValid, "panic": id}, tokenValid)
	case surfTemplate:
		_, err = rec.rep.cat.ReadResource(context.Background(), templateRead(h.sn, 0, 0, id), tokenValid)
	case surfResource:
		h.panic.Store(true)
		_, err = rec.rep.cat.ReadResource(context.Background(), rec.name, tokenValid)
	}
	if !errors.Is(err, catalog.ErrRoutePanicked) && !wait.Closed(rec.done) && !rec.rep.crashed.Load() {
		w.t.Unexpected("the panic %s of %s (%s on %s) got %v", h.sn.kind, rec.tag, rec.name, rec.rep.name, err)
	}
	w.awaitDeath(h.held, sh, deathTimeout)
	h.cancel()
}

// templateRead is the URI of a read of sn's template.
func templateRead(sn *surfName, seq uint64, via int, panicID string) string {
	scheme, _, _ := strings.Cut(sn.raw, "://")
	uri := scheme + "://x/" + credValid + "/" + strconv.FormatUint(seq, 10) + "/" + strconv.Itoa(via)
	if panicID != "" {
		uri += "?panic=" + panicID
	}
	return uri
}

// codeResourceNotFound is the resource-not-found code the server sends
// (mcp.ResourceNotFoundError), which the SDK has deprecated in name only.
const codeResourceNotFound = -32002

// surfaceOutcome classifies a prompts/get or resources/read answer as
// calls' are; an unknown resource is -32002, not -32602.
func surfaceOutcome(err error) outcome {
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		return outcomeOK
	case errors.As(err, &werr) && (werr.Code == jsonrpc.CodeInvalidParams || werr.Code == codeResourceNotFound):
		if strings.Contains(string(werr.Data), "route_gone") {
			return outcomeGone
		}
		return outcomeUnknown
	case errors.As(err, &werr) && werr.Code == mcpserve.CodePeerUnavailable:
		return outcomePeerUnavailable
	}
	return outcomeOther
}

// surfaceGet gets a prompt or reads a template of sn through r with the
// valid credential, and judges the answer: the forward checks when r
// located the route on another replica, and, whatever the route, that
// an answer names a consumer of sn.
func (w *world) surfaceGet(ctx context.Context, r *replica, sn *surfName) {
	cs := r.clients[0]
	if cs == nil {
		return
	}
	lost, lease := r.rep.SessionsLost(), r.rep.Lease()
	peer, located := r.rep.Peer(sn.kind.catalogKind(), sn.ns.name)
	hs := w.holderSession(peer)
	var holder *record
	if located {
		holder = w.holderAt(sn.ns.name, peer)
	}
	before := locate(r, sn.kind.catalogKind(), sn.ns.name)
	seq := w.tick()
	var text string
	var err error
	switch sn.kind {
	case surfPrompt:
		var res *mcp.GetPromptResult
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: sn.ns.name, Arguments: map[string]string{
			"seq": strconv.FormatUint(seq, 10), "via": strconv.Itoa(r.id), "cred": credValid}})
		if err == nil && len(res.Messages) > 0 {
			if tc, ok := res.Messages[0].Content.(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
	case surfTemplate:
		var res *mcp.ReadResourceResult
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: templateRead(sn, seq, r.id, "")})
		if err == nil && len(res.Contents) > 0 {
			text = res.Contents[0].Text
		}
	default:
		return
	}
	hidden := r.rep.SessionsLost() != lost || r.rep.Lease() == 0
	o := surfaceOutcome(err)
	if o == outcomePeerUnavailable && !hidden {
		hidden = w.unenrolled(lease)
	}
	if o == outcomePeerUnavailable && !hidden {
		if p := hs.r; hs.kept(w) {
			w.t.Unexpected("%s %s on %s: peer unavailable, though the holder it located, %s, is up (located by %s at view revision %d; after the call, %s): %s",
				sn.kind, sn.ns.name, r.name, p.name, before, before.rev, locate(r, sn.kind.catalogKind(), sn.ns.name).after(), errText(err))
		}
	}
	if o == outcomeOther && (r.down.Load() || ctx.Err() != nil) {
		o = outcomeReplicaDown
	}
	w.surfOutcomes[sn.kind][o].Add(1)
	if holder != nil {
		w.forward.answered(holder, r, seq, credValid, o, text, hidden, before.shows(holder), nil)
	}
	switch o {
	case outcomeOK:
		w.judgeSurfaceAnswer(sn, r, text)
	case outcomeOther:
		w.t.Unexpected("%s %s on %s: %s", sn.kind, sn.ns.name, r.name, errText(err))
	}
}

// judgeSurfaceAnswer checks that an answer through r to a get or read of
// sn came from a consumer of sn (invariant 3's forward_answer, local
// answers included): its text is the tag of the consumer whose body gave
// it.
func (w *world) judgeSurfaceAnswer(sn *surfName, r *replica, text string) {
	w.t.Check(InvForwardAnswer, 1)
	if rec := w.lookup(text); rec == nil || rec.name != sn.ns.name {
		w.t.Violate(InvForwardAnswer, "a %s of %s through %s was answered %q, not by a consumer of %s", sn.kind, sn.ns.name, r.name, text, sn.ns.name)
	}
}

// surfaceListings returns r's prompt and template listings as name=title
// strings, marked by kind, for the convergence check.
func surfaceListings(r *replica) []string {
	var l []string
	for _, p := range r.cat.Prompts().List() {
		l = append(l, "prompt:"+p.Name+"="+p.Title)
	}
	for _, t := range r.cat.Templates().List() {
		l = append(l, "template:"+t.URITemplate+"="+t.Title)
	}
	return l
}

// liveSurface is what the prompt and template listings must settle at
// once churn stops, in surfaceListings' form.
func (w *world) liveSurface() []string {
	var out []string
	for _, sn := range w.surf {
		if sn.kind == surfResource {
			continue
		}
		sn.ns.mu.Lock()
		for _, rec := range sn.ns.winners {
			if rec.alive() && !rec.rep.crashed.Load() {
				if sn.kind == surfPrompt {
					out = append(out, "prompt:"+rec.name+"="+rec.tag)
				} else {
					out = append(out, "template:"+sn.raw+"="+rec.tag)
				}
			}
		}
		sn.ns.mu.Unlock()
	}
	return out
}

// surfaceCounts formats the counts of one kind's answers.
func surfaceCounts(counts *[numOutcomes]atomic.Int64) map[string]int64 {
	out := map[string]int64{}
	for o := range numOutcomes {
		out[o.String()] = counts[o].Load()
	}
	return out
}
