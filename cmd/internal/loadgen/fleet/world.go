package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
	"github.com/livereg/livereg/etcdfleet"
)

// shape is how a consumer ended.
type shape int

const (
	shapeStop    shape = iota // clean Stop
	shapeCancel               // its start context cancelled
	shapePanic                // its body panicked
	shapeDrop                 // dropped without Stop, collected by the GC
	shapeSession              // killed by its replica's lost session
	shapeCrash                // abandoned with its crashed replica
	numShapes
)

var shapeNames = [numShapes]string{"stop", "cancel", "panic", "drop", "session_lost", "crashed"}

func (s shape) String() string { return shapeNames[s] }

// Bounds on waits that a correct fleet meets far sooner; hitting one is an
// error rather than a hung run.
const (
	stopTimeout  = 5 * time.Second
	deathTimeout = 5 * time.Second
	dropTimeout  = 10 * time.Second
)

// nameState is one name of the shared pool: the consumers whose starts on
// it succeeded and that may still hold it.
type nameState struct {
	name    string
	mu      sync.Mutex
	winners []*record
}

// world is what one run's workers and checkers share.
type world struct {
	cfg   Config
	t     *tally
	f     *fleet
	clock atomic.Uint64
	ids   atomic.Uint64
	recs  sync.Map // tag → *record
	names []*nameState
	lats  *latency.Book[op] // merged into the report
	lat   *latency.Set[op]  // lats' one set, shared by every goroutine

	claims  claimChecker
	release releaseChecker
	body    bodyChecker
	forward forwardChecker
	byName  map[string]*nameState
	conv    convergeChecker
	crash   crashChecker
	lost    lostClaimChecker
	fg      *forger   // nil unless Config.Forge
	im      *impostor // nil unless Config.Forge
	tasks   taskBook
	// The other kinds of route (surface.go), resource updates (subs.go)
	// and progress (progress.go).
	surf         []*surfName
	surfStarts   [numSurfKinds]atomic.Int64
	surfClaims   [numSurfKinds]atomic.Int64
	surfOutcomes [numSurfKinds][numOutcomes]atomic.Int64
	subs         *subsBook
	prog         *progressBook

	pause    chan struct{} // closed when churn stops
	pausing  atomic.Bool
	survMu   sync.Mutex
	survivor []*held

	starts, claimsWon, duplicates, startRefused, lateStops atomic.Int64
	deaths                                                 [numShapes]atomic.Int64
	outcomes                                               [numOutcomes]atomic.Int64
	pendingDrops                                           atomic.Int64
	crashes, cutLosses, revokeLosses                       atomic.Int64
	freeMu                                                 sync.Mutex
	freeTimes, leaseTimes                                  []time.Duration // per crash probe: name claimed, lease gone
}

func newWorld(cfg Config, f *fleet) *world {
	w := &world{cfg: cfg, t: &tally{}, f: f, pause: make(chan struct{})}
	w.lats, w.lat = newLatencies()
	for i := range cfg.Names {
		w.names = append(w.names, &nameState{name: "tool-" + strconv.Itoa(i)})
	}
	w.claims = newClaimChecker(w.t, f.leaseAlive, cfg.TTL+time.Second)
	w.release = releaseChecker{t: w.t, lookup: w.lookup, leaseAlive: f.leaseAlive}
	w.body = bodyChecker{w.t}
	w.forward = forwardChecker{t: w.t, leaseAlive: f.leaseAlive, lookup: w.lookup, local: w.liveDuring}
	w.byName = map[string]*nameState{}
	for _, ns := range w.names {
		w.byName[ns.name] = ns
	}
	w.newSurface()
	w.subs = newSubsBook(w.t, w.tick)
	w.prog = f.prog
	if w.prog == nil {
		w.prog = newProgressBook()
	}
	w.conv = convergeChecker{t: w.t, bound: cfg.ConvergeBound}
	w.crash = crashChecker{t: w.t, bound: cfg.TTL + cfg.FreeSlack}
	w.lost = lostClaimChecker{t: w.t, dir: f.toolDir(), lookup: w.lookup, current: func(r *replica) int64 { return int64(r.rep.Lease()) }}
	return w
}

// tick reads the run's clock (inproc's "one clock for before"):
// every reading is unique, later ones larger, never 0.
func (w *world) tick() uint64 { return w.clock.Add(1) }

func (w *world) lookup(tag string) *record {
	if v, ok := w.recs.Load(tag); ok {
		return v.(*record)
	}
	return nil
}

func (w *world) newRecord(name string, r *replica, public bool) *record {
	id := w.ids.Add(1)
	rec := &record{id: id, name: name, tag: "fl-" + strconv.FormatUint(id, 10), public: public, rep: r}
	w.recs.Store(rec.tag, rec)
	return rec
}

// held is a started consumer as the goroutine that owns it keeps it: k is
// the only reference to the Consumer anywhere in the run.
type held struct {
	k      *catalog.Consumer
	rec    *record
	cancel context.CancelFunc
	lost   int // the replica's lost sessions before the start
}

var inputSchema = json.RawMessage(`{"type":"object"}`)

// handler is rec's route body: it runs the body-side checks, panics when
// asked to, and answers with its owner's tag.
func (w *world) handler(rec *record) catalog.ToolHandler {
	return func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		var a callArgs
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return catalog.ErrorResult("fleetload: bad arguments"), nil
		}
		w.body.bodyRan(rec, a, c.Principal)
		if a.Panic != 0 && a.Panic == rec.id {
			panic("fleetload: deliberate panic in the route body")
		}
		if a.Progress != 0 {
			w.prog.report(ctx, c, a.Progress, rec)
		}
		if a.Task != 0 {
			w.tasks.bodyRan(a.Task, rec)
			return c.Detach(ctx, func(context.Context) (catalog.Result, error) {
				time.Sleep(taskHold(a.Task)) // heedless of its consumer's death, as many bodies are
				return catalog.TextResult(taskResult(rec, a.Task)), nil
			})
		}
		return catalog.TextResult(rec.tag), nil
	}
}

// start starts a consumer of ns on r and runs the start-side checks. Its
// context is its own: ending the run must not kill consumers behind the
// workers' backs.
func (w *world) start(r *replica, ns *nameState, public bool) (*held, error) {
	rec := w.newRecord(ns.name, r, public)
	life, cancel := context.WithCancel(context.Background())
	lost, before := r.rep.SessionsLost(), r.rep.Lease()
	t0 := time.Now()
	k, err := r.cat.StartTool(life, catalog.Tool{Name: ns.name, Title: rec.tag, Description: "fleet loadgen tool", InputSchema: inputSchema, TaskSupport: catalog.TaskOptional},
		bearer.Plan(rec.public), w.handler(rec))
	w.lat.Record(opStart, time.Since(t0))
	w.starts.Add(1)
	if err != nil {
		cancel()
		w.recs.Delete(rec.tag)
		switch {
		case errors.Is(err, catalog.ErrDuplicate):
			w.duplicates.Add(1)
		case errors.Is(err, etcdfleet.ErrSessionLost), errors.Is(err, etcdfleet.ErrUnavailable), errors.Is(err, etcdfleet.ErrClosed):
			// A replica between sessions, or cut off from etcd.
			w.startRefused.Add(1)
		case r.crashed.Load():
			w.startRefused.Add(1)
		default:
			w.t.Unexpected("start %s on %s: %v", ns.name, r.name, err)
		}
		return nil, err
	}
	rec.done, rec.owner = k.Done(), k.Owner().ID()
	if after := r.rep.Lease(); after == before && before != 0 {
		rec.lease.Store(int64(before))
	}
	rec.won.Store(true)
	w.claimsWon.Add(1)
	ns.mu.Lock()
	others := ns.winners[:0]
	for _, o := range ns.winners {
		if o.alive() && !o.stopping.Load() {
			others = append(others, o)
		}
	}
	ns.winners = append(others, rec)
	others = append([]*record(nil), others...)
	ns.mu.Unlock()
	w.claims.startWon(rec, others)
	return &held{k: k, rec: rec, cancel: cancel, lost: lost}, nil
}

// observeDeath records that rec's owner was seen dead.
func (w *world) observeDeath(rec *record, sh shape) {
	if rec.death.CompareAndSwap(0, w.tick()) {
		w.deaths[sh].Add(1)
	}
}

// consumer starts consumers on random replicas and ends them by the four
// shapes until churn stops; the one it holds then survives.
func (w *world) consumer(index int) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(1000+index)))
	var carry *held
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
			if h, err = w.start(r, w.names[rng.IntN(len(w.names))], rng.IntN(2) == 0); err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
		}
		// One hold in ten outlasts the TTL a few times over, so that
		// session losses and crashes find consumers to kill.
		longest := w.cfg.Hold
		if rng.IntN(10) == 0 {
			longest = max(longest, 3*w.cfg.TTL)
		}
		hold := time.NewTimer(time.Duration(rng.Int64N(int64(longest) + 1)))
		select {
		case <-h.rec.done:
			hold.Stop()
			w.diedAlone(h)
			continue
		case <-w.pause:
			hold.Stop()
			w.survMu.Lock()
			w.survivor = append(w.survivor, h)
			w.survMu.Unlock()
			return
		case <-hold.C:
		}
		if h.rec.rep.crashed.Load() {
			w.abandon(h)
			continue
		}
		sh := shape(rng.IntN(4))
		w.end(h, sh)
		if (sh == shapeCancel || sh == shapePanic) && h.k != nil && rng.IntN(2) == 0 && !w.pausing.Load() {
			// Restart the name, anywhere, then stop the dead one late: its
			// release must not remove the successor's key.
			if r := w.f.pick(rng); r != nil {
				succ, _ := w.start(r, w.names[indexOf(w.names, h.rec.name)], rng.IntN(2) == 0)
				w.lateStop(h)
				carry = succ
				continue
			}
		}
		if h.k != nil {
			h.k = nil
		}
	}
}

func indexOf(names []*nameState, name string) int {
	for i, ns := range names {
		if ns.name == name {
			return i
		}
	}
	return 0
}

// diedAlone judges a consumer that died while nobody was ending it: its
// replica crashed or lost its session, or it is an error.
func (w *world) diedAlone(h *held) {
	r := h.rec.rep
	switch {
	case r.crashed.Load():
		w.abandon(h)
	case r.rep.SessionsLost() > h.lost:
		w.observeDeath(h.rec, shapeSession)
		h.cancel()
	default:
		w.observeDeath(h.rec, shapeSession)
		h.cancel()
		w.t.Unexpected("%s (%s on %s) died with nobody ending it and no session lost", h.rec.tag, h.rec.name, r.name)
	}
}

// abandon forgets a consumer of a crashed replica, as its process's death
// would: nothing more is done to it or judged of it.
func (w *world) abandon(h *held) {
	h.k = nil
	w.deaths[shapeCrash].Add(1)
}

// end ends h by sh and observes the death.
func (w *world) end(h *held, sh shape) {
	rec := h.rec
	switch sh {
	case shapeStop:
		rec.stopping.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		t0 := time.Now()
		err := h.k.Stop(ctx)
		w.lat.Record(opStop, time.Since(t0))
		cancel()
		if err == nil {
			rec.stopped.Store(true)
		} else if !rec.rep.crashed.Load() {
			w.t.Unexpected("stop %s (%s on %s): %v", rec.tag, rec.name, rec.rep.name, err)
		}
		h.k = nil
		w.awaitDeath(h, sh, deathTimeout)
		h.cancel()
	case shapeCancel:
		h.cancel()
		w.awaitDeath(h, sh, deathTimeout)
	case shapePanic:
		a, _ := json.Marshal(callArgs{Seq: w.tick(), Cred: credValid, Via: rec.rep.id, Panic: rec.id})
		_, err := rec.rep.cat.CallTool(context.Background(), rec.name, a, tokenValid)
		if !errors.Is(err, catalog.ErrRoutePanicked) && !wait.Closed(rec.done) && !rec.rep.crashed.Load() {
			w.t.Unexpected("the panic call of %s (%s on %s) got %v", rec.tag, rec.name, rec.rep.name, err)
		}
		w.awaitDeath(h, sh, deathTimeout)
		h.cancel()
	case shapeDrop:
		h.k = nil
		w.pendingDrops.Add(1)
		w.awaitDeath(h, sh, dropTimeout)
		w.pendingDrops.Add(-1)
		h.cancel() // only now: earlier would kill it by the cancel path
	}
}

// awaitDeath waits for h's Done and observes the death.
func (w *world) awaitDeath(h *held, sh shape, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.rec.done:
		if h.rec.rep.crashed.Load() && sh != shapeStop {
			w.abandon(h)
			return
		}
		w.observeDeath(h.rec, sh)
	case <-t.C:
		if h.rec.rep.crashed.Load() {
			w.abandon(h)
			return
		}
		w.t.Unexpected("%s (%s on %s) ended by %s is not dead after %v", h.rec.tag, h.rec.name, h.rec.rep.name, sh, d)
	}
}

// lateStop stops a consumer that already died by a crash shape, after a
// successor may have taken its name.
func (w *world) lateStop(dead *held) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err := dead.k.Stop(ctx)
	dead.k = nil
	w.lateStops.Add(1)
	if err != nil && !dead.rec.rep.crashed.Load() {
		w.t.Unexpected("late stop of %s (%s on %s): %v", dead.rec.tag, dead.rec.name, dead.rec.rep.name, err)
	}
}

// gcHelper collects garbage while a dropped consumer waits for it.
func (w *world) gcHelper(ctx context.Context) {
	wait.Every(ctx, 10*time.Millisecond, func() {
		if w.pendingDrops.Load() > 0 {
			runtime.GC()
		}
	})
}

// liveRoutes is what every listing must settle at once churn stops: the
// routes of the live consumers of up replicas.
func (w *world) liveRoutes() []string {
	var out []string
	for _, ns := range w.names {
		ns.mu.Lock()
		for _, rec := range ns.winners {
			if rec.alive() && !rec.rep.crashed.Load() {
				out = append(out, rec.name+"="+rec.tag)
			}
		}
		ns.mu.Unlock()
	}
	out = append(out, w.liveSurface()...)
	sortStrings(out)
	return out
}
