package inproc

import (
	"context"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
	"github.com/livereg/livereg/cmd/internal/loadgen/runner"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// RunOptions are the parts of a run that are not its Config.
type RunOptions struct {
	// Progress, if set, gets a carriage-return progress line a few times a
	// second. Main sets it only when stderr is a terminal.
	Progress io.Writer
	// extra run beside the workload until the run ends; the MCP mode uses
	// them to drive its own client.
	extra []func(ctx context.Context, rs *runState)
	// Tolerance overrides DefaultGrowthTolerance when set.
	Tolerance *GrowthTolerance
	// mcp, if set, drives calls and listings through an MCP client too.
	mcp *mcpDriver
	// QuietTimeout bounds the end-of-run wait for dead entries to be
	// reclaimed; 0 means 2 s.
	QuietTimeout time.Duration
	// notifyMargin overrides notifyMargin when set: a test that makes
	// notifications go missing need not wait the generous default.
	notifyMargin time.Duration
	// changeWithin overrides changeWithin when set, for the same reason.
	changeWithin time.Duration
}

// Intervals of the run's helpers.
const (
	probeInterval    = 5 * time.Millisecond  // cap counter samples
	notifyInterval   = 5 * time.Millisecond  // judging pending list_changed
	gcInterval       = 10 * time.Millisecond // GC while drops are pending
	progressInterval = 250 * time.Millisecond
	quietTimeout     = 2 * time.Second // default for dead entries to be reclaimed
	workerGrace      = 5 * time.Second // before in-flight calls are cancelled
)

// endReason is the reason rs.finish keeps for each end of the load; an
// -ops end has finished rs already, with "ops", before the runner sees it.
var endReason = [...]string{runner.EndDuration: "duration", runner.EndInterrupted: "interrupted", runner.EndDone: "ops"}

// Run runs the workload against sys until cfg's duration or ops budget is
// reached or ctx ends, then winds down, runs the end-of-run checks and
// returns the report. Cancelling ctx (Ctrl-C) ends the run early; it still
// winds down and reports.
func Run(ctx context.Context, cfg Config, sys System, opts RunOptions) *Report {
	w := newWorld(cfg, sys)
	if opts.Tolerance != nil {
		w.growth.tol = *opts.Tolerance
	}
	if opts.changeWithin > 0 {
		w.changes.within = opts.changeWithin
	}
	return w.run(ctx, opts)
}

// run is the whole run, phase by phase: the latency sets, the baseline,
// the MCP client, the background helpers, the load, the quiet phase, the
// end-of-run probes, then the growth verdicts and the report. It is called
// once per world, from one goroutine.
func (w *world) run(ctx context.Context, opts RunOptions) *Report {
	defer w.unlisten()
	quiet := quietTimeout
	if opts.QuietTimeout > 0 {
		quiet = opts.QuietTimeout
	}
	book := latency.NewBook(numOps)
	resolverLat, consumerLat := w.latencySets(book, opts.mcp != nil)
	rs := newRunState()

	// The baseline is taken with everything the run allocates up front
	// already allocated, and before any goroutine of the run exists.
	runtime.GC()
	w.growth.setBaseline(w.growth.read())
	w.startMCP(ctx, &opts, book)

	bgCtx, stopBg := context.WithCancel(context.Background())
	bg := w.startHelpers(bgCtx, opts.Progress)
	elapsed := w.load(ctx, rs, opts.extra, resolverLat, consumerLat)
	w.quietEnd(rs, quiet, consumerLat)
	w.endProbes(opts.mcp, consumerLat)
	if opts.mcp != nil {
		opts.mcp.close()
	}
	stopBg()
	bg.Wait()
	if opts.Progress != nil {
		io.WriteString(opts.Progress, "\r\033[K")
	}
	w.growth.judgeRun()
	w.growth.judgeEnd()

	reason, _ := rs.reason.Load().(string)
	rep := w.report(elapsed, reason == "interrupted", book.Merged())
	if opts.mcp != nil {
		rep.Mode = "mcp: " + opts.mcp.endpointName()
	}
	return rep
}

// latencySets makes one latency set per in-process resolver and one shared
// by the consumers. With an MCP client the -resolvers goroutines call
// through it, and one in-process resolver runs beside them: both paths
// share the CPUs, and in-process resolvers spin so much faster than HTTP
// round trips that as many of them would starve the server.
func (w *world) latencySets(book *latency.Book[op], viaMCP bool) ([]*latencies, *latencies) {
	inProcess := w.cfg.Resolvers
	if viaMCP {
		inProcess = 1
	}
	resolverLat := make([]*latencies, inProcess)
	for i := range resolverLat {
		resolverLat[i] = book.Set(false, opCall, opList, opGet, opRead)
	}
	return resolverLat, book.Set(true, opStart, opStop, opLateStop)
}

// startMCP connects opts.mcp, if set, and adds its resolvers to opts.extra,
// each with a latency set of its own. It is called after the baseline and
// its client is closed before the end check, so that its connections count
// as the run's own goroutines. A client that cannot start is an unexpected
// finding, and the run goes on without it.
func (w *world) startMCP(ctx context.Context, opts *RunOptions, book *latency.Book[op]) {
	d := opts.mcp
	if d == nil {
		return
	}
	if d.cat != nil {
		margin := notifyMargin
		if opts.notifyMargin > 0 {
			margin = opts.notifyMargin
		}
		w.notes = newNotifyChecker(w.t, w.tick, int(numCreds), notifyWindow+margin)
		d.noted = w.notes.noted
	}
	if err := d.start(ctx); err != nil {
		w.t.Unexpected("%v", err)
		opts.mcp = nil
		w.notes = nil
		return
	}
	for i := range w.cfg.Resolvers {
		l := book.Set(false, opMCPCall, opMCPList, opMCPGet, opMCPRead)
		opts.extra = append(opts.extra, func(ctx context.Context, rs *runState) { w.mcpResolver(ctx, rs, d, i, l) })
	}
}

// startHelpers starts the goroutines that run beside the load until ctx
// ends: the cap prober, the GC helper, the growth sampler, the change and
// notification judges and, if progress is set, the progress line. The
// caller cancels ctx and waits on the returned group.
func (w *world) startHelpers(ctx context.Context, progress io.Writer) *sync.WaitGroup {
	bg := new(sync.WaitGroup)
	bg.Go(func() { w.prober(ctx, probeInterval) })
	bg.Go(func() { w.gcHelper(ctx, gcInterval) })
	bg.Go(func() { w.growth.sampleLoop(ctx, sampleInterval(w.cfg.Duration)) })
	if w.notes != nil {
		bg.Go(func() { w.notes.loop(ctx, notifyInterval) })
	}
	bg.Go(func() { w.changes.follow(ctx) })
	if _, real := w.sys.(*CatalogSystem); real {
		// Invariant 20 runs on a catalog of its own (deniedcheck.go).
		if d, err := newDeniedChecker(w.t); err != nil {
			w.t.Unexpected("denied_heard: %v", err)
		} else {
			bg.Go(func() { d.loop(ctx) })
		}
	}
	bg.Go(func() { w.changes.loop(ctx, notifyInterval) })
	if progress != nil {
		began := time.Now()
		bg.Go(func() { w.progress(ctx, progress, began) })
	}
	return bg
}

// load runs the resolvers (the in-process ones, then extra) and the
// consumers through runner.Run until the duration, the -ops budget or ctx
// ends it, and returns how long it lasted.
func (w *world) load(ctx context.Context, rs *runState, extra []func(context.Context, *runState), resolverLat []*latencies, consumerLat *latencies) time.Duration {
	plan := runner.Plan{
		Duration:      w.cfg.Duration,
		Done:          rs.stopCh, // closed early when -ops is reached
		Stop:          func(e runner.End) { rs.finish(endReason[e]) },
		ResolverGrace: workerGrace,
		ConsumerGrace: dropTimeout + stopTimeout + workerGrace,
		Unexpected:    w.t.Unexpected,
	}
	for i, l := range resolverLat {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { w.resolver(ctx, rs, i, l) })
	}
	for _, fn := range extra {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { fn(ctx, rs) })
	}
	for i := range w.cfg.Consumers {
		plan.Consumers = append(plan.Consumers, func() { w.consumer(rs, i, consumerLat) })
	}
	_, elapsed := runner.Run(ctx, plan)
	return elapsed
}

// quietEnd is the quiet phase: no start in flight and every death
// observed. The catalog must hold exactly the survivors' entries, then
// none once they stop; each wait is bounded by quiet.
func (w *world) quietEnd(rs *runState, quiet time.Duration, consumerLat *latencies) {
	rs.mu.Lock()
	survivors := rs.survivors
	rs.mu.Unlock()
	var live []*held
	for _, h := range survivors {
		if wait.Closed(h.done) {
			w.observeDeath(h.rec, shapeUnexpected)
			w.t.Unexpected("%s (%s) died at the end of the run with nobody ending it", h.rec.tag, h.rec.ns.name)
			continue
		}
		live = append(live, h)
	}
	var liveOf [numKinds]int
	for _, h := range live {
		liveOf[h.rec.ns.kind]++
	}
	for k, c := range w.capk {
		c.quiet(context.Background(), w.sys, liveOf[k], quiet, "quiet at the end of the run")
	}
	for _, h := range live {
		w.end(h, shapeStop, consumerLat)
	}
	for _, c := range w.capk {
		c.quiet(context.Background(), w.sys, 0, quiet, "after every consumer ended")
	}
}

// endProbes runs after the quiet phase, with nothing else changing: every
// change still pending must be announced; then the probe makes each kind
// of change the only one. With MCP notifications, they are judged while
// the sessions are still connected, so d must not be closed yet.
func (w *world) endProbes(d *mcpDriver, consumerLat *latencies) {
	w.changes.drain()
	w.changeProbe(consumerLat)
	if w.notes != nil {
		// Every end's deadline passes within the margin.
		w.notes.drain()
		w.notifyProbe(context.Background(), d, notifyWindow, consumerLat)
		w.changes.drain() // the probe's starts and ends, in process
	}
}

// sampleInterval spreads about 200 resource samples over the run.
func sampleInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return 100 * time.Millisecond
	}
	return min(max(d/200, 10*time.Millisecond), time.Second)
}
