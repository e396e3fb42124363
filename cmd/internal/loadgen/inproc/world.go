package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// outcome classifies a call's result.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeUnknown
	outcomeGone
	outcomeDenied
	outcomeOverloaded
	outcomePanicked
	outcomeCanceled
	outcomeToolError // the body's own error result (MCP target mode)
	outcomeOther
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "unknown", "gone", "denied", "overloaded", "panicked", "canceled", "tool_error", "other"}

func (o outcome) String() string { return outcomeNames[o] }

func classify(err error) outcome {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, catalog.ErrNotFound):
		return outcomeUnknown
	case errors.Is(err, catalog.ErrRouteGone):
		return outcomeGone
	case catalog.Denied(err):
		return outcomeDenied
	case errors.Is(err, catalog.ErrOverloaded), errors.Is(err, catalog.ErrTooManyTasks):
		return outcomeOverloaded
	case errors.Is(err, catalog.ErrRoutePanicked):
		return outcomePanicked
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	}
	return outcomeOther
}

// Bounds on waits that a correct catalog meets in microseconds; hitting one
// is reported as an error rather than hanging the run.
const (
	stopTimeout  = 5 * time.Second  // one Stop
	deathTimeout = 5 * time.Second  // Done after a Stop, cancel or panic
	dropTimeout  = 10 * time.Second // Done of a dropped consumer, GC included
)

// world is the state one run shares between its workers and checkers.
type world struct {
	cfg Config
	sys System
	t   *tally

	clock  atomic.Uint64 // see "One clock for before" in the package doc
	nextID atomic.Uint64
	// taskNonce numbers the tasks of invariant 18; taskOwners maps a
	// task's nonce to the record of the consumer whose body runs it.
	taskNonce  atomic.Uint64
	taskOwners sync.Map
	names      []*nameState // tool names
	prompts    []*nameState // prompt names
	groups     []tmplGroup  // template keys, two per group
	templates  []*nameState // every group's keys
	resources  []*nameState // fixed resources' URIs
	ring       *recordRing
	potential  [numKinds]atomic.Uint64 // per kind, begun<<32 | potential holders; see capChecker

	body   bodyChecker
	auth   authChecker
	dead   deadEntryChecker
	dup    dupChecker
	capc   capChecker // tools'
	capk   [numKinds]capChecker
	tmpl   templateChecker
	upd    updateChecker
	late   lateStopChecker
	growth *growthChecker
	notes  *notifyChecker // invariant 10 over MCP; nil unless an in-process MCP server runs
	// changes is invariant 10 in process, drain 13, after 14 and lists 15
	// and 16.
	changes *changeChecker
	drain   drainChecker
	after   afterDeathChecker
	lists   listChecker
	// A Stop of a consumer whose id is a multiple of drainEvery runs the
	// drain probe with a held body, one whose id is half drainEvery more
	// than a multiple the probe that keeps calling. A cancel of one whose
	// id is 1 more than a multiple of dyingEvery runs the dying probe, and
	// every other cancel the listing probe, whose moment is short enough to
	// need many tries. Enough of each to judge many times a run without
	// slowing the workload down.
	drainEvery, dyingEvery uint64

	starts, takeovers, capRejections, duplicates atomic.Int64
	lateStops, lateChecks, lateInconclusive      atomic.Int64
	deaths                                       [numShapes]atomic.Int64
	outcomes, mcpOutcomes                        [numOutcomes]atomic.Int64
	kindOutcomes                                 [numKinds][numOutcomes]atomic.Int64 // gets and reads; tool calls are in outcomes
	kindStarts                                   [numKinds]atomic.Int64
	unchecked                                    atomic.Int64 // listed tools whose record was recycled
	pendingDrops                                 atomic.Int64 // dropped consumers not yet collected
	updatesPublished, updatesRefused             atomic.Int64 // resource consumers' Updated calls
	// unlisten ends the update checker's listener.
	unlisten func()
}

func newWorld(cfg Config, sys System) *world {
	w := &world{cfg: cfg, sys: sys, t: &tally{}, names: newNames(cfg.Names), prompts: newPrompts(cfg.Names),
		groups: newGroups(cfg.Names), resources: newResources(cfg.Names), ring: &recordRing{}}
	for _, g := range w.groups {
		w.templates = append(w.templates, g.wide, g.specific)
	}
	w.body = bodyChecker{w.t}
	w.auth = authChecker{w.t}
	w.dead = deadEntryChecker{t: w.t, lookup: w.ring.get}
	w.dup = dupChecker{w.t}
	for k := range numKinds {
		w.capk[k] = capChecker{t: w.t, cap: capOf(cfg, k), kind: k}
	}
	w.capc = w.capk[kindTool]
	w.tmpl = templateChecker{w.t}
	w.upd = newUpdateChecker(w.t, w.resources)
	w.unlisten = sys.OnResourceUpdated(w.upd.heard)
	w.late = lateStopChecker{t: w.t, tick: w.tick, invoke: w.invokeRetry, list: w.listKind}
	w.growth = newGrowthChecker(w.t, DefaultGrowthTolerance, readProcess)
	w.changes = newChangeChecker(w.t, sys, changeWithin)
	w.drain = drainChecker{t: w.t, bound: stopTimeout, hold: drainHold}
	w.after = afterDeathChecker{t: w.t, hooks: ownerHooks{}, wait: dyingWait}
	w.lists = listChecker{t: w.t, lookup: w.ring.get}
	w.drainEvery, w.dyingEvery = 8, 8
	return w
}

// tick reads the clock: every reading is unique and later readings are
// larger. 0 is never returned.
func (w *world) tick() uint64 { return w.clock.Add(1) }

// held is a started consumer as the goroutine that owns it keeps it. The
// handle k is the only reference to the Consumer anywhere in the loadgen.
type held struct {
	k      Consumer
	done   <-chan struct{}
	rec    *record
	cancel context.CancelFunc
}

func (w *world) newRecord(ns *nameState, public bool) *record {
	id := w.nextID.Add(1)
	rec := &record{id: id, ns: ns, tag: tagFor(id), public: public}
	w.ring.put(rec)
	return rec
}

// handler is the route body of rec's consumer. It runs the body-side
// checks, panics when asked to by id, and answers with its owner's tag so
// that a caller can tell which consumer served it.
func (w *world) handler(rec *record) catalog.ToolHandler {
	return func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		var a callArgs
		if err := decodeArgs(c.Arguments, &a); err != nil {
			return catalog.ErrorResult("loadgen: bad arguments"), nil
		}
		rec.running.Add(1) // invariant 13: from the body's first line to its last
		defer rec.running.Add(-1)
		w.bodyChecks(rec, a, c.Principal)
		if a.Task != 0 {
			w.holdTask(rec, a.Task)
		}
		if a.Ask {
			if err := w.askRound(ctx, rec, c); err != nil {
				return catalog.Result{}, err
			}
		}
		return catalog.TextResult(rec.tag), nil
	}
}

// rounder is a System whose calls can be made in rounds (the real
// catalog's; a fake's bodies cannot ask).
type rounder interface {
	CallToolRound(ctx context.Context, name string, args json.RawMessage, credential string, r *catalog.Round) (catalog.Result, error)
}

// callInRounds calls name as a caller that answers in rounds, as an MCP
// 2026-07-28 client does: a body's question ends the first round, and the
// second carries the answer (the asker's tag, which the question names)
// to the instance that asked.
func callInRounds(ctx context.Context, r rounder, name string, args json.RawMessage, credential string) (catalog.Result, error) {
	res, err := r.CallToolRound(ctx, name, args, credential, &catalog.Round{Elicitation: true})
	var ir *catalog.InputRequiredError
	if !errors.As(err, &ir) {
		return res, err
	}
	answers := make(map[string]catalog.InputResponse, len(ir.Requests))
	for _, q := range ir.Requests {
		if q.Elicit != nil {
			answers[q.Key] = catalog.InputResponse{Elicit: catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"asker": q.Elicit.Message}}}
		}
	}
	return r.CallToolRound(ctx, name, args, credential, &catalog.Round{Instance: ir.Instance, Answers: answers, Elicitation: true})
}

// tasker is a System that runs tasks (the real catalog's).
type tasker interface {
	StartTask(ctx context.Context, name string, args json.RawMessage, credential string) (id string, err error)
	GetTask(id, credential string) (catalog.TaskInfo, error)
}

// callAsTask calls name as a task and reads it until it ends, checking
// invariant 18 at every read: once the consumer whose body runs it was
// observed dead, the task never reads working again. Its answer is what
// the call's would be: the result and error of a completed task, the
// reason of a failed one.
func (w *world) callAsTask(ctx context.Context, r tasker, name string, args []byte, credential string) (catalog.Result, error) {
	nonce := w.taskNonce.Add(1)
	id, err := r.StartTask(ctx, name, withTask(args, nonce), credential)
	if err != nil {
		return catalog.Result{}, err
	}
	defer w.taskOwners.Delete(nonce)
	for {
		began := w.tick()
		info, err := r.GetTask(id, credential)
		if err != nil {
			w.t.Unexpected("task %s of %s: %v", id, name, err)
			return catalog.Result{}, err
		}
		if v, ok := w.taskOwners.Load(nonce); ok {
			rec := v.(*record)
			w.t.Check(InvTaskOutlivedConsumer, 1)
			if !info.Terminal() && rec.diedBefore(began) {
				w.t.Violate(InvTaskOutlivedConsumer, "a task of %s (%s) read %s at %d, after its consumer was observed dead at %d",
					rec.tag, name, info.Status, began, rec.death.Load())
			}
		}
		switch info.Status {
		case catalog.TaskCompleted:
			return info.Result, info.Err
		case catalog.TaskFailed:
			return catalog.Result{}, info.Err
		case catalog.TaskCancelled:
			w.t.Unexpected("task %s of %s: cancelled, though nobody cancelled it", id, name)
			return catalog.Result{}, info.Err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// holdTask is invariant 18 from inside a task's body: it notes the
// body's consumer for the caller's checks, then holds the body a moment,
// heedless of its consumer's death as many bodies are, so that deaths
// catch tasks working.
func (w *world) holdTask(rec *record, nonce uint64) {
	w.taskOwners.Store(nonce, rec)
	time.Sleep(300 * time.Microsecond)
}

// askRound is invariant 17 from inside a body: it asks the caller to
// name the asker, giving its own tag, and the answer, which a 2026-07-28
// caller gives in the call's next round, must name this body's consumer.
// A caller that cannot be asked (an in-process one, a session without
// elicitation) is let go.
func (w *world) askRound(ctx context.Context, rec *record, c catalog.Call) error {
	r, err := c.Elicit(ctx, catalog.ElicitRequest{Key: "asker", Message: rec.tag})
	switch {
	case errors.Is(err, catalog.ErrNotSupported):
		return nil
	case err != nil:
		return err // catalog.ErrInputRequired: the round ends here
	}
	w.t.Check(InvRoundReachedOther, 1)
	if got, _ := r.Content["asker"].(string); got != rec.tag {
		w.t.Violate(InvRoundReachedOther, "the answer to %s's question reached %s's body", got, rec.tag)
	}
	return nil
}

// start starts a consumer on ns and does every start-side check. Its
// context is not the run's: ending the run must not kill consumers by
// cancellation behind the workers' backs.
func (w *world) start(ns *nameState, public bool, l *latencies) (*held, error) {
	rec := w.newRecord(ns, public)
	pot := &w.potential[ns.kind]
	s := startSnapshot{ns: ns, starts: ns.starts.Add(countOneIn), potential: pot.Add(potOneIn)}
	s.holder = ns.holder.Load()
	s.begin = w.tick()
	rec.begin.Store(s.begin)
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Now()
	k, err := w.startRoute(ctx, ns, rec)
	l.Record(opStart, time.Since(t0))
	w.starts.Add(1)
	w.kindStarts[ns.kind].Add(1)
	w.dup.started(s, err)
	if err != nil {
		cancel()
		if errors.Is(err, catalog.ErrCapReached) {
			w.capRejections.Add(1)
			w.capk[ns.kind].refused(s, pot.Load())
		}
		pot.Add(potOneOut)
		ns.starts.Add(countOneOut)
		switch {
		case errors.Is(err, catalog.ErrDuplicate):
			w.duplicates.Add(1)
		case errors.Is(err, catalog.ErrCapReached):
		default:
			w.t.Unexpected("start %s: %v", ns.name, err)
		}
		return nil, err
	}
	if prev := ns.holder.Load(); prev != nil && prev.death.Load() != 0 && prev.deathShape().crash() {
		w.takeovers.Add(1)
	}
	ref := k.Owner()
	rec.owner.Store(&ref)
	w.after.watch(rec, ref)
	w.dead.startWon(ns, rec)
	ns.holder.Store(rec)
	ns.starts.Add(countOneOut)
	w.changeStarted(rec)
	return &held{k: k, done: k.Done(), rec: rec, cancel: cancel}, nil
}

// call calls ns's tool with a credential of class cred and runs the
// call-side checks.
func (w *world) call(ctx context.Context, ns *nameState, cred credClass, l *latencies) outcome {
	s := callSnapshot{ns: ns, starts: ns.starts.Load()}
	s.holder = ns.holder.Load()
	s.begin = w.tick()
	args := encodeArgs(s.begin, cred, 0, 0)
	t0 := time.Now()
	var res catalog.Result
	var err error
	if r, ok := w.sys.(rounder); ok && s.begin%16 == 0 {
		res, err = callInRounds(ctx, r, ns.name, withAsk(args), cred.token()) // invariant 17
	} else if r, ok := w.sys.(tasker); ok && s.begin%16 == 8 {
		res, err = w.callAsTask(ctx, r, ns.name, args, cred.token()) // invariant 18
	} else {
		res, err = w.sys.CallTool(ctx, ns.name, args, cred.token())
	}
	l.Record(opCall, time.Since(t0))
	o := classify(err)
	w.outcomes[o].Add(1)
	w.dead.callEnded(s, o)
	w.dead.oneWinner(s, o, resultText(res))
	if o == outcomeOther || o == outcomePanicked {
		w.t.Unexpected("call %s: %v", ns.name, err)
	}
	return o
}

// list lists the tools and checks the listing.
func (w *world) list(l *latencies) {
	var buf [16]*record
	dead := w.lists.deadBefore(w.names, buf[:0])
	begin := w.tick()
	t0 := time.Now()
	tools := w.sys.ListTools()
	l.Record(opList, time.Since(t0))
	if n := w.dead.listed(begin, tools); n > 0 {
		w.unchecked.Add(int64(n))
	}
	entries := make([]listedEntry, len(tools))
	for i, t := range tools {
		entries[i] = listedEntry{t.Name, t.Title}
	}
	w.lists.listed(dead, entries)
}

// observeDeath is called once Done was seen closed: it takes the death
// mark that every "observed dead before" check compares with.
func (w *world) observeDeath(rec *record, sh shape) {
	rec.shape.Store(int32(sh))
	rec.death.Store(w.tick())
	rec.owner.Store(nil) // dead for good: the ring must not keep its route
	w.potential[rec.ns.kind].Add(potOneOut)
	w.deaths[sh].Add(1)
	w.changeEnded(rec)
}

// end ends h by shape sh, waits for its death and observes it. It returns
// the shape the consumer actually died by (a panic that could not be
// delivered falls back to a cancel), or shapeNone if it did not die.
func (w *world) end(h *held, sh shape, l *latencies) shape {
	if w.notes != nil && h.rec.ns.kind == kindTool {
		// Which sessions must hear of the end is settled before it
		// begins: see notifyChecker.
		listening := w.notes.listening()
		defer func() {
			if at := h.rec.death.Load(); at != 0 {
				w.notes.ended(h.rec, at, listening)
			}
		}()
	}
	switch sh {
	case shapeStop:
		var probe *drainProbe
		switch h.rec.id % w.drainEvery {
		case 0:
			probe = w.startDrainProbe(h, true)
		case w.drainEvery / 2:
			probe = w.startDrainProbe(h, false)
		}
		h.rec.stopping.Store(true)
		err := w.stop(h, l, opStop)
		if probe != nil {
			probe.finish()
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			// Invariant 13's.
		case err != nil:
			w.t.Unexpected("stop %s (%s): %v", h.rec.tag, h.rec.ns.name, err)
		default:
			h.rec.stopped.Store(true)
		}
	case shapeCancel:
		switch h.rec.id % w.dyingEvery {
		case 1 % w.dyingEvery:
			w.cancelDying(h)
		default:
			w.cancelListed(h, l)
		}
	case shapePanic:
		if !w.triggerPanic(h) {
			sh = shapeCancel
			h.cancel()
		}
	case shapeDrop:
		return w.drop(h)
	}
	if !wait.Within(h.done, deathTimeout) {
		w.t.Unexpected("%s (%s) not dead %v after its %s", h.rec.tag, h.rec.ns.name, deathTimeout, sh)
		return shapeNone
	}
	w.observeDeath(h.rec, sh)
	h.cancel()
	return sh
}

// triggerPanic makes h's route body panic through a call with h's id.
func (w *world) triggerPanic(h *held) bool {
	ctx, cancel := context.WithTimeout(context.Background(), deathTimeout)
	defer cancel()
	_, err := w.invokeRetry(ctx, h.rec.ns, callArgs{Seq: w.tick(), Cred: credValid.String(), Panic: h.rec.id}, credValid)
	if errors.Is(err, catalog.ErrRoutePanicked) {
		return true
	}
	w.t.Unexpected("panic call to %s (%s) got %v, want ErrRoutePanicked", h.rec.tag, h.rec.ns.name, err)
	return false
}

// drop forgets h's Consumer without stopping it and waits for the garbage
// collector to end it. The collection itself is left to the GC helper and
// to the runtime, so that the token dies through the drop path only.
func (w *world) drop(h *held) shape {
	done := h.done
	h.k = nil
	w.pendingDrops.Add(1)
	defer w.pendingDrops.Add(-1)
	if !wait.Within(done, dropTimeout) {
		w.t.Violate(InvResourceGrowth, "%s (%s) dropped without Stop was not collected within %v: its entry and goroutines leak",
			h.rec.tag, h.rec.ns.name, dropTimeout)
		return shapeNone
	}
	w.observeDeath(h.rec, shapeDrop)
	h.cancel() // only now: cancelling earlier would kill it by the cancel path
	return shapeDrop
}

// lateStop stops dead, a consumer that died by a crash shape, after succ
// (nil if the restart was refused) took its name over, and checks the
// successor.
func (w *world) lateStop(dead, succ *held, l *latencies) {
	w.publish(dead) // observed dead, its successor perhaps live: refused
	err := w.stop(dead, l, opLateStop)
	dead.k = nil
	w.lateStops.Add(1)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		w.t.Unexpected("late stop of %s (%s): %v", dead.rec.tag, dead.rec.ns.name, err)
	}
	if succ == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if w.late.check(ctx, succ) {
		w.lateChecks.Add(1)
	} else {
		w.lateInconclusive.Add(1)
	}
}

// gcHelper collects garbage every interval while a dropped consumer waits
// to be collected, so that drop deaths take milliseconds rather than
// however long the runtime would wait for its next cycle.
func (w *world) gcHelper(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() {
		if w.pendingDrops.Load() > 0 {
			runtime.GC()
		}
	})
}
