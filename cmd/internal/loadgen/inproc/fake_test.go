package inproc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
	"github.com/yosida95/uritemplate/v3"
)

// bug is one deliberate fault of fakeSystem. Each checker's test feeds it
// a fake with the fault that checker exists to catch.
type bug uint32

const (
	// bugRunDeadBodies: dispatch ignores owner liveness, so resolve
	// returns dead entries and their bodies run (invariant 1).
	bugRunDeadBodies bug = 1 << iota
	// bugUnconditionalStop: Stop deletes the name's entry and plan
	// whoever owns them (invariant 2).
	bugUnconditionalStop
	// bugStopRemovesPlan: Stop deletes the name's plan whoever owns it;
	// entries stay owner-conditional (invariant 2, and 3 in pass-through).
	bugStopRemovesPlan
	// bugNoAuth: calls are admitted without looking at credentials
	// (invariant 3).
	bugNoAuth
	// bugCapOvershoot: a start refused as a duplicate still takes a slot,
	// so the counter drifts above what is held and above the cap
	// (invariant 4).
	bugCapOvershoot
	// bugSlotsNotFreed: a start at full cap does not sweep dead entries
	// (invariant 4).
	bugSlotsNotFreed
	// bugListDead: listings include dead-owner entries (invariant 5).
	bugListDead
	// bugGoneForDead: resolve returns dead entries; dispatch then answers
	// ErrRouteGone without running the body (invariant 5).
	bugGoneForDead
	// bugDupDead: a dead incumbent still blocks a start (invariant 6).
	bugDupDead
	// bugLeak: every start leaks a goroutine and some memory (invariant 7).
	bugLeak
	// bugSlotLeak: a removal frees the entry but not its slot, so the
	// counter drifts above what is held while staying within the cap: only
	// the quiet check can see it (invariant 4).
	bugSlotLeak
	// bugBodyAfterStop: Stop returns at once and ends the consumer only
	// after one more call has run its body (or a second has passed), so
	// a call after Stop reaches the body every time (invariant 8).
	bugBodyAfterStop
	// bugStaleBody: bodies are cached by name and the cache is never
	// invalidated, so a restart under a name keeps serving the first
	// consumer's body (invariant 9).
	bugStaleBody
	// bugLiveTakeover: a start replaces the name's entry even when its
	// owner is alive, as two takeovers that both read the same dead
	// incumbent would (invariant 9).
	bugLiveTakeover
	// bugMatchDead: a templated read matches templates whose owner is
	// dead, which then answer ErrNotFound, though a live template
	// matches too (invariant 5's templated reads).
	bugMatchDead
	// bugLessSpecific: a templated read picks the least specific template
	// that matches (invariant 11).
	bugLessSpecific
	// bugWrongVars: a reader gets the matched variables under the key's
	// "_" names, not its template's own (invariant 11).
	bugWrongVars
	// bugVarNamesDistinct: templates are keyed by their whole string, so
	// two that differ only in a variable's name both start (invariant 9).
	bugVarNamesDistinct
	// bugUpdateDead: a resource consumer's Updated publishes whether or
	// not it lives and holds its URI (invariant 12).
	bugUpdateDead
	// bugUpdateDropped: Updated returns nil without calling the
	// listeners (invariant 12).
	bugUpdateDropped
	// bugNoDrain: Stop returns without waiting for the bodies it let in
	// (invariant 13).
	bugNoDrain
	// bugDrainHangs: Stop's drain misses its wake-up and waits until its
	// context ends (invariant 13).
	bugDrainHangs
	// bugTornListing: a listing reads the first half of the names, lets
	// go of the lock for a moment (calling listHook, if set), then reads
	// the rest, so that it can show two states at once (invariant 15).
	bugTornListing
	// bugListDying: listings trust the reaper, which removes a dead
	// owner's entry once it has seen the death, rather than the owner's
	// liveness, so a route whose owner reads dead is listed until then
	// (invariant 16).
	bugListDying
	// bugDeathSilent: the reclaim of a dead owner's entry moves the
	// version but closes no Changes channel (invariant 10).
	bugDeathSilent
)

// noticesDeathBugs lists the bugs of a system that does not notice deaths
// by itself: such a fake neither reclaims a dead owner's entry when it
// dies nor when a call or a listing meets it, so that the fault has dead
// entries to show. They go only when replaced, stopped or swept at cap.
const noticesDeathBugs = bugRunDeadBodies | bugSlotsNotFreed | bugListDead | bugGoneForDead | bugDupDead | bugMatchDead

// fakeSystem is a small, lock-based catalog with the same contract as
// *catalog.Catalog for tools, prompts and resource templates, plus
// switchable faults, each of which applies to every kind. Without faults it satisfies
// every invariant, which the control tests check.
type fakeSystem struct {
	cap  [numKinds]int
	bugs bug
	auth bindsec.Authenticator
	mode bindsec.MissingPlanMode

	mu      sync.Mutex
	entries map[string]*fakeEntry
	plans   map[string]fakePlan
	slots   [numKinds]int
	// bodyCache is the stale-body fault's cache, name → first body.
	bodyCache map[string]catalog.ToolHandler
	// listeners are the OnResourceUpdated functions by id.
	listeners    map[int]func(string)
	nextListener int

	closed chan struct{}
	leaked [][]byte
	bodies atomic.Int64

	// version and changed are Version and Changes: removals and ready
	// entries move the version, and starts, Stops and the reaper close
	// the channel, as the catalog's lookups and listings reclaim silently
	// and the owner's death announces.
	version atomic.Uint64
	changed atomic.Pointer[chan struct{}]
	// listHook runs in the middle of a torn listing; reapGate, if set,
	// holds the reaper until it is closed. Both are for scenario tests.
	listHook func()
	reapGate chan struct{}
}

type fakeEntry struct {
	kind    kind
	key     string // the name, or a template's key
	tool    catalog.Tool
	h       catalog.ToolHandler
	ph      catalog.PromptHandler
	prompt  catalog.Prompt
	rd      catalog.ResourceReader
	tpl     catalog.ResourceTemplate
	res     catalog.Resource
	match   *uritemplate.Template
	literal int // a template's literal bytes: its specificity
	ref     owner.Ref
	release func()
	// closed (under fakeSystem.mu) refuses new calls once Stop began;
	// inflight counts the calls let in, which Stop waits for.
	closed   bool
	inflight sync.WaitGroup
	// late, under the body-after-stop fault, is closed by the first body
	// that runs after Stop returned; nil otherwise.
	late     chan struct{}
	lateOnce sync.Once
}

type fakePlan struct {
	p   bindsec.Plan
	ref owner.Ref
}

func newFake(capacity int, bugs bug) *fakeSystem {
	f := &fakeSystem{
		cap:  [numKinds]int{capacity, kindCap(Config{Cap: capacity}), kindCap(Config{Cap: capacity}), kindCap(Config{Cap: capacity})},
		bugs: bugs, auth: Authenticator(), mode: bindsec.PassThrough,
		entries: map[string]*fakeEntry{}, plans: map[string]fakePlan{}, closed: make(chan struct{}),
		bodyCache: map[string]catalog.ToolHandler{}, listeners: map[int]func(string){},
	}
	ch := make(chan struct{})
	f.changed.Store(&ch)
	return f
}

// announce closes the Changes channel. Callers move the version first.
func (f *fakeSystem) announce() {
	next := make(chan struct{})
	close(*f.changed.Swap(&next))
}

func (f *fakeSystem) Changes() <-chan struct{} { return *f.changed.Load() }
func (f *fakeSystem) Version() uint64          { return f.version.Load() }

func (f *fakeSystem) has(b bug) bool { return f.bugs&b != 0 }

// Close ends the goroutines the leak fault parked and drops its memory.
func (f *fakeSystem) Close() {
	close(f.closed)
	f.mu.Lock()
	f.leaked = nil
	f.mu.Unlock()
}

type fakeConsumer struct {
	f       *fakeSystem
	tok     *owner.Token
	name    string
	e       *fakeEntry
	stopped atomic.Bool
}

func (f *fakeSystem) StartTool(ctx context.Context, t catalog.Tool, p bindsec.Plan, h catalog.ToolHandler) (Consumer, error) {
	return f.start(ctx, &fakeEntry{kind: kindTool, key: t.Name, tool: t, h: h}, p)
}

// start starts e, whose kind, key and body are set, under plan p.
func (f *fakeSystem) start(ctx context.Context, e *fakeEntry, p bindsec.Plan) (Consumer, error) {
	name := mapKey(e.kind, e.key)
	tok := owner.NewContext(ctx)
	ref := tok.Ref()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.has(bugLeak) {
		f.leaked = append(f.leaked, make([]byte, 128<<10))
		go func() { <-f.closed }()
	}
	cur := f.entries[name]
	if cur != nil && (cur.ref.Alive() || f.has(bugDupDead)) && !f.has(bugLiveTakeover) {
		if f.has(bugCapOvershoot) {
			f.slots[e.kind]++
		}
		tok.Release()
		return nil, fmt.Errorf("fake: start %q: %w", name, catalog.ErrDuplicate)
	}
	if cur == nil {
		if f.slots[e.kind] >= f.cap[e.kind] && !f.has(bugSlotsNotFreed) {
			for key, o := range f.entries {
				if o.kind == e.kind && !o.ref.Alive() {
					f.removeLocked(key, o.ref)
				}
			}
		}
		if f.slots[e.kind] >= f.cap[e.kind] {
			tok.Release()
			return nil, fmt.Errorf("fake: start %q: %w", name, catalog.ErrCapReached)
		}
		f.slots[e.kind]++
	}
	if f.has(bugStaleBody) {
		if old, ok := f.bodyCache[name]; ok {
			e.h = old
		} else {
			f.bodyCache[name] = e.h
		}
	}
	e.ref, e.release = ref, tok.Releaser()
	f.entries[name] = e
	f.plans[name] = fakePlan{p: p, ref: ref}
	if !f.has(noticesDeathBugs) {
		go f.reclaimOnDeath(name, ref, f.reapGate)
	}
	f.version.Add(1)
	f.announce()
	return &fakeConsumer{f: f, tok: tok, name: name, e: e}, nil
}

// reclaimOnDeath removes the owner's entry and plan when it dies, as the
// catalog does when a death runs its reclaim.
func (f *fakeSystem) reclaimOnDeath(name string, ref owner.Ref, gate chan struct{}) {
	select {
	case <-ref.Done():
	case <-f.closed:
		return
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	f.removeLocked(name, ref)
	if pl, ok := f.plans[name]; ok && pl.ref.Same(ref) {
		delete(f.plans, name)
	}
	if !f.has(bugDeathSilent) {
		f.announce()
	}
	f.mu.Unlock()
}

// removeLocked removes name's entry if ref owns it.
func (f *fakeSystem) removeLocked(name string, ref owner.Ref) bool {
	if e := f.entries[name]; e != nil && e.ref.Same(ref) {
		delete(f.entries, name)
		if !f.has(bugSlotLeak) {
			f.slots[e.kind]--
		}
		f.version.Add(1)
		return true
	}
	return false
}

func (k *fakeConsumer) Done() <-chan struct{} { return k.tok.Done() }
func (k *fakeConsumer) Owner() owner.Ref      { return k.tok.Ref() }

func (k *fakeConsumer) Stop(ctx context.Context) error {
	if !k.stopped.CompareAndSwap(false, true) {
		return nil
	}
	if k.f.has(bugDrainHangs) {
		k.stop()
		<-ctx.Done()
		return ctx.Err()
	}
	if k.f.has(bugBodyAfterStop) {
		k.f.mu.Lock()
		k.e.late = make(chan struct{})
		late := k.e.late
		k.f.mu.Unlock()
		go func() {
			select {
			case <-late:
			case <-time.After(time.Second):
			case <-k.f.closed:
			}
			k.stop()
		}()
		return nil
	}
	k.stop()
	return nil
}

func (k *fakeConsumer) stop() {
	f, ref := k.f, k.tok.Ref()
	f.mu.Lock()
	k.e.closed = true
	if f.has(bugUnconditionalStop) {
		if e, ok := f.entries[k.name]; ok {
			delete(f.entries, k.name)
			f.slots[e.kind]--
			f.version.Add(1)
		}
		delete(f.plans, k.name)
	} else {
		f.removeLocked(k.name, ref)
	}
	f.announce()
	f.mu.Unlock()
	if !f.has(bugNoDrain) {
		k.e.inflight.Wait() // Stop drains the calls it let in
	}
	k.tok.Release()
	f.mu.Lock()
	if pl, ok := f.plans[k.name]; ok && (pl.ref.Same(ref) || f.has(bugStopRemovesPlan)) {
		delete(f.plans, k.name)
	}
	f.mu.Unlock()
}

func (f *fakeSystem) CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (res catalog.Result, err error) {
	err = f.dispatch(ctx, name, credential, catalog.ErrNotFound, func(e *fakeEntry, pr bindsec.Principal) (err error) {
		res, err = e.h(ctx, catalog.Call{Name: name, Arguments: args, Principal: pr})
		return err
	})
	return res, err
}

// dispatch resolves the entry under name, guards it with its plan, and
// runs body on it as the catalog runs a route's body.
func (f *fakeSystem) dispatch(ctx context.Context, name, credential string, unknown error, body func(*fakeEntry, bindsec.Principal) error) (err error) {
	f.mu.Lock()
	e := f.entries[name]
	if e != nil && !e.ref.Alive() && !f.has(bugRunDeadBodies|bugGoneForDead) {
		if !f.has(noticesDeathBugs) {
			f.removeLocked(name, e.ref)
		}
		e = nil
	}
	if e != nil && e.closed {
		e = nil
	}
	var late chan struct{}
	if e != nil {
		e.inflight.Add(1)
		defer e.inflight.Done()
		late = e.late
	}
	pl, hasPlan := f.plans[name]
	f.mu.Unlock()
	if e == nil {
		return fmt.Errorf("fake: %w %q", unknown, name)
	}
	if f.has(bugGoneForDead) && !e.ref.Alive() {
		return fmt.Errorf("fake: %q: %w", name, catalog.ErrRouteGone)
	}
	var pr bindsec.Principal
	switch {
	case f.has(bugNoAuth):
	case hasPlan && pl.ref.Alive() && !pl.ref.Same(e.ref):
		return fmt.Errorf("fake: %q: %w", name, catalog.ErrRouteGone)
	case !hasPlan || !pl.ref.Alive():
		if f.mode == bindsec.Deny {
			return fmt.Errorf("fake: %q: %w", name, bindsec.ErrNoPlan)
		}
	case !pl.p.Public:
		if credential == "" {
			return fmt.Errorf("fake: %q: %w", name, bindsec.ErrUnauthenticated)
		}
		if pr, err = f.auth.Authenticate(ctx, credential); err != nil {
			return fmt.Errorf("fake: %q: %w", name, err)
		}
		if err = pl.p.Authorize(pr, time.Now()); err != nil {
			return fmt.Errorf("fake: %q: %w", name, err)
		}
	}
	if !e.ref.Alive() && !f.has(bugRunDeadBodies) {
		return fmt.Errorf("fake: %q: %w", name, catalog.ErrRouteGone)
	}
	defer func() {
		if p := recover(); p != nil {
			e.release()
			err = fmt.Errorf("fake: %q: %w: %v", name, catalog.ErrRoutePanicked, p)
		}
	}()
	f.bodies.Add(1)
	if late != nil {
		defer e.lateOnce.Do(func() { close(late) })
	}
	return body(e, pr)
}

func (f *fakeSystem) ListTools() []catalog.Tool {
	var out []catalog.Tool
	for _, e := range f.list(kindTool) {
		out = append(out, e.tool)
	}
	return out
}

// list returns the listed entries of kind k, sorted by key.
func (f *fakeSystem) list(k kind) []*fakeEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for name, e := range f.entries {
		if e.kind == k {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []*fakeEntry
	for i := 0; i < len(names); i++ {
		if f.has(bugTornListing) && i > 0 && i == len(names)/2 {
			f.mu.Unlock()
			if f.listHook != nil {
				f.listHook()
			} else {
				time.Sleep(50 * time.Microsecond) // long enough for a Stop and a start
			}
			f.mu.Lock()
			// The rest of the names as they are now: a later start's
			// entry is listed beside an earlier one that is gone.
			for later, e := range f.entries {
				if e.kind == k && later > names[i-1] && !slices.Contains(names[i:], later) {
					names = append(names, later)
				}
			}
			slices.Sort(names[i:])
		}
		name := names[i]
		e := f.entries[name]
		switch {
		case e == nil:
		case e.ref.Alive() || f.has(bugListDead|bugListDying):
			out = append(out, e)
		case !f.has(noticesDeathBugs):
			f.removeLocked(name, e.ref)
		}
	}
	return out
}

func (f *fakeSystem) Stats() catalog.Stats {
	tools, prompts, templates := len(f.list(kindTool)), len(f.list(kindPrompt)), len(f.list(kindTemplate))
	resources := len(f.list(kindResource))
	f.mu.Lock()
	defer f.mu.Unlock()
	return catalog.Stats{Tools: tools, ToolSlots: f.slots[kindTool], Prompts: prompts, PromptSlots: f.slots[kindPrompt],
		Templates: templates, TemplateSlots: f.slots[kindTemplate], Resources: resources, ResourceSlots: f.slots[kindResource]}
}
