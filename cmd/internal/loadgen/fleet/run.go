package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/livereg/livereg/cmd/internal/loadgen/runner"
	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// Run runs the fleet workload for cfg.Duration or until ctx ends, then
// stops churn, measures convergence, winds down and returns the report.
// It returns an error only when the fleet cannot be set up. Everything it
// starts (an embedded etcd unless cfg.Etcd is set, the replicas, their
// servers, clients and proxies, its workers) has ended when it returns,
// its temporary directory removed; with cfg.Etcd its claims live under a
// prefix of its own, which the replicas' leases clean up. Runs are
// independent: several may run at once. Cost: the whole machine, by
// design, for the duration and a few seconds more.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, nil)
}

// run is Run; plant, if set, may change the fleet before any replica
// joins (tests plant faults with it).
func run(ctx context.Context, cfg Config, plant func(*fleet)) (*Report, error) {
	f := &fleet{endpoints: cfg.Etcd, ttl: cfg.TTL, opTimeout: time.Second, slots: make([]atomicReplica, cfg.Fleet), prog: newProgressBook()}
	var b [8]byte
	_, _ = rand.Read(b[:])
	f.prefix = "/livereg-loadgen/" + hex.EncodeToString(b[:])
	f.token = "fleet-" + hex.EncodeToString(b[:]) + "-token"
	if len(f.endpoints) == 0 {
		dir, err := os.MkdirTemp("", "livereg-loadgen-etcd-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		ep, stop, err := startEtcd(dir)
		if err != nil {
			return nil, err
		}
		defer stop()
		f.endpoints = []string{ep}
	}
	if plant != nil {
		plant(f)
	}
	var err error
	f.direct, err = clientv3.New(clientv3.Config{Endpoints: f.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	defer f.direct.Close()
	defer f.closeAll()
	// The watch starts at the revision after this Get, made before any
	// replica joins, so that no delete of the run is missed.
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	status, err := f.direct.Get(hctx, f.prefix)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", f.endpoints, err)
	}
	for i := range f.slots {
		r, err := f.newReplica(ctx, i)
		if err != nil {
			return nil, err
		}
		f.slots[i].Store(r)
	}
	w := newWorld(cfg, f)
	if cfg.Forge {
		fg := &forger{cli: f.direct, dir: f.toolDir()}
		if fg.trap, err = newTrap(f.token); err != nil {
			return nil, fmt.Errorf("forger's trap: %w", err)
		}
		defer fg.trap.close()
		fg.check = forgeChecker{t: w.t, trapURL: fg.trap.url}
		fg.trap.start(fg.check.trapHit)
		w.fg = fg
		if w.im, err = newImpostor(ctx, f, w.t); err != nil {
			return nil, err
		}
		defer w.im.close()
	}
	return w.run(ctx, status.Header.Revision+1), nil
}

// closeAll shuts every replica instance down at once: a live one leaves
// the fleet (Close revokes its lease); a crashed one's revoke cannot reach
// etcd, and is given 100 ms.
func (f *fleet) closeAll() {
	f.mu.Lock()
	all := f.all
	f.all = nil
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() {
			// A crashed replica's revoke cannot reach etcd: its lease
			// expires by itself.
			d := 2 * time.Second
			if r.crashed.Load() {
				d = 100 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			r.close(ctx)
		})
	}
	wg.Wait()
}

func (w *world) run(ctx context.Context, watchFrom int64) *Report {
	cfg := w.cfg
	bgCtx, stopBg := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { w.gcHelper(bgCtx) })
	bg.Go(func() { w.sampler(bgCtx, 50*time.Millisecond) })
	bg.Go(func() { w.watcher(bgCtx, watchFrom) })

	chaosCtx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	var chaos sync.WaitGroup
	chaos.Go(func() { w.chaos(chaosCtx) })
	if w.fg != nil {
		// The forger stops with the failures, before churn stops: what
		// it wrote is gone by the time listings must converge.
		chaos.Go(func() { w.forge(chaosCtx, w.fg) })
		chaos.Go(func() { w.watchImpostor(chaosCtx, w.im) })
	}

	stopResolvers := make(chan struct{})
	plan := runner.Plan{
		Duration: cfg.Duration,
		// Churn stops: no more failures (the one under way finishes, a
		// crashed replica's replacement included), calls, starts or ends.
		Stop: func(runner.End) {
			stopChaos()
			chaos.Wait()
			close(stopResolvers)
		},
		StopConsumers: func() {
			w.pausing.Store(true)
			close(w.pause)
		},
		ResolverGrace: 10 * time.Second,
		ConsumerGrace: dropTimeout + stopTimeout + 10*time.Second,
		Unexpected:    w.t.Unexpected,
	}
	for i := range cfg.Resolvers {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { w.resolver(ctx, i, stopResolvers) })
	}
	for i := range cfg.Taskers {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { w.tasker(ctx, i, stopResolvers) })
	}
	for i := range cfg.Subscribers {
		plan.Resolvers = append(plan.Resolvers, func(ctx context.Context) { w.subscriber(ctx, i, stopResolvers) })
	}
	for i := range cfg.Consumers {
		plan.Consumers = append(plan.Consumers, func() { w.consumer(i) })
	}
	for i := range cfg.SurfaceConsumers {
		plan.Consumers = append(plan.Consumers, func() { w.surfaceConsumer(i) })
	}
	end, elapsed := runner.Run(ctx, plan)
	interrupted := end == runner.EndInterrupted

	// Invariant 4: every replica lists the same, within the bound, and
	// then the live consumers' routes (a crashed replica's claims go
	// when its lease expires).
	conv, _ := w.conv.converge(context.Background(), w.listings, 2*time.Second)
	settled := w.conv.settle(context.Background(), w.listings, w.liveRoutes, cfg.TTL+2*time.Second)

	w.quietLatency(context.Background())
	// Invariant 7 once more, churn stopped: the watch has caught up with
	// every claim by now.
	w.judgeLostClaims()

	for _, h := range w.survivor {
		if h.rec.rep.crashed.Load() || wait.Closed(h.rec.done) {
			continue
		}
		w.end(h, shapeStop)
	}
	stopBg()
	bg.Wait()
	return w.report(elapsed, interrupted, conv, settled)
}
