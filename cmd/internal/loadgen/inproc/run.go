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
	"github.com/livereg/livereg/mcpserve"
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

func (w *world) run(ctx context.Context, opts RunOptions) *Report {
	defer w.unlisten()
	cfg := w.cfg
	quiet := quietTimeout
	if opts.QuietTimeout > 0 {
		quiet = opts.QuietTimeout
	}
	book := latency.NewBook(numOps)
	// With an MCP client the -resolvers goroutines call through it, and
	// one in-process resolver runs beside them: both paths share the
	// CPUs, and in-process resolvers spin so much faster than HTTP round
	// trips that as many of them would starve the server.
	inProcess := cfg.Resolvers
	if opts.mcp != nil {
		inProcess = 1
	}
	resolverLat := make([]*latencies, inProcess)
	for i := range resolverLat {
		resolverLat[i] = book.Set(false, opCall, opList, opGet, opRead)
	}
	consumerLat := book.Set(true, opStart, opStop, opLateStop)
	rs := newRunState()

	// The baseline is taken with everything the run allocates up front
	// already allocated, and before any goroutine of the run exists.
	runtime.GC()
	w.growth.setBaseline(w.growth.read())
	if d := opts.mcp; d != nil {
		if d.cat != nil {
			margin := notifyMargin
			if opts.notifyMargin > 0 {
				margin = opts.notifyMargin
			}
			w.notes = newNotifyChecker(w.t, w.tick, int(numCreds), mcpserve.DefaultNotifyWindow+margin)
			d.noted = w.notes.noted
		}
		// Started after the baseline and closed before the end check,
		// so that its connections count as the run's own goroutines.
		if err := d.start(ctx); err != nil {
			w.t.Unexpected("%v", err)
			opts.mcp = nil
			w.notes = nil
		} else {
			for i := range cfg.Resolvers {
				l := book.Set(false, opMCPCall, opMCPList, opMCPGet, opMCPRead)
				opts.extra = append(opts.extra, func(ctx context.Context, rs *runState) { w.mcpResolver(ctx, rs, d, i, l) })
			}
		}
	}

	bgCtx, stopBg := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { w.prober(bgCtx, probeInterval) })
	bg.Go(func() { w.gcHelper(bgCtx, gcInterval) })
	bg.Go(func() { w.growth.sampleLoop(bgCtx, sampleInterval(cfg.Duration)) })
	if w.notes != nil {
		bg.Go(func() { w.notes.loop(bgCtx, notifyInterval) })
	}
	bg.Go(func() { w.changes.follow(bgCtx) })
	bg.Go(func() { w.changes.loop(bgCtx, notifyInterval) })

	began := time.Now()
	if opts.Progress != nil {
		bg.Go(func() { w.progress(bgCtx, opts.Progress, began) })
	}

	plan := runner.Plan{
		Duration:      cfg.Duration,
		Done:          rs.stopCh, // closed early when -ops is reached
		Stop:          func(e runner.End) { rs.finish(endReason[e]) },
		ResolverGrace: workerGrace,
		ConsumerGrace: dropTimeout + stopTimeout + workerGrace,
		Unexpected:    w.t.Unexpected,
	}
	for i := range inProcess {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { w.resolver(ctx, rs, i, resolverLat[i]) })
	}
	for _, fn := range opts.extra {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { fn(ctx, rs) })
	}
	for i := range cfg.Consumers {
		plan.Consumers = append(plan.Consumers, func() { w.consumer(rs, i, consumerLat) })
	}
	_, elapsed := runner.Run(ctx, plan)

	// Quiet: no start in flight and every death observed. The catalog must
	// hold exactly the survivors' entries, then none once they stop.
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
	// With nothing else changing, every change still pending must be
	// announced; then the probe makes each kind of change the only one.
	w.changes.drain()
	w.changeProbe(consumerLat)

	if w.notes != nil {
		// Judged while the sessions are still connected: every end's
		// deadline passes within the margin.
		w.notes.drain()
		w.notifyProbe(context.Background(), opts.mcp, mcpserve.DefaultNotifyWindow, consumerLat)
		w.changes.drain() // the probe's starts and ends, in process
	}
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

// sampleInterval spreads about 200 resource samples over the run.
func sampleInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return 100 * time.Millisecond
	}
	return min(max(d/200, 10*time.Millisecond), time.Second)
}
