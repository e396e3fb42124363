package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// action is one kind of replica failure the chaos loop makes.
type action int

const (
	actRevoke action = iota // its lease revoked from outside: a session loss
	actCrash                // cut from etcd, server stopped, abandoned, replaced
	actCut                  // its etcd connections cut for longer than the TTL: a session loss
	numActions
)

// chaos makes one failure Config.ChaosEvery after the last one ended
// (on a random replica), cycling through the
// kinds so that every run of a few seconds has each, until ctx ends.
func (w *world) chaos(ctx context.Context) {
	if w.cfg.ChaosEvery <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 3000))
	for n := 0; ; n++ {
		t := time.NewTimer(w.cfg.ChaosEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		slot := rng.IntN(len(w.f.slots))
		r := w.f.slots[slot].Load()
		if r == nil || r.down.Load() {
			continue
		}
		switch action(n % int(numActions)) {
		case actCrash:
			w.crashReplica(ctx, slot, r, rng)
		case actRevoke:
			w.revokeSession(r)
		case actCut:
			w.cutSession(r)
		}
	}
}

// crashReplica crashes r, brings a fresh replica up in its slot, and
// measures how soon a name r held is free elsewhere (invariant 5): a probe
// name, started on r just before the crash, outside the shared pool so
// that no other start competes for it.
func (w *world) crashReplica(ctx context.Context, slot int, r *replica, rng *rand.Rand) {
	probe := &nameState{name: fmt.Sprintf("probe-%d", w.crashes.Load()+1)}
	var ph *held
	for range 3 {
		// A start fails only while the replica is between sessions.
		var err error
		if ph, err = w.start(r, probe, true); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	lease := r.rep.Lease()
	t0 := time.Now()
	r.crash()
	w.crashes.Add(1)
	if ph != nil {
		ph.k = nil // gone with its process
	}
	// The probe runs from the crash on, beside the replacement's start;
	// the next failure waits for it, since one on the probing replica
	// would hold its starts up for reasons of its own.
	var probing sync.WaitGroup
	if ph != nil {
		if other := w.f.pick(rng); other != nil {
			probing.Go(func() { w.probeFree(context.WithoutCancel(ctx), probe, other, t0, int64(lease)) })
			ph = nil
		}
	}
	fresh, err := w.f.newReplica(ctx, slot)
	if err != nil {
		if ctx.Err() == nil {
			w.t.Unexpected("replacing crashed replica %s: %v", r.name, err)
		}
		probing.Wait()
		return
	}
	w.f.slots[slot].Store(fresh)
	if ph != nil {
		// A fleet of one: the replacement is the other replica.
		w.probeFree(context.WithoutCancel(ctx), probe, fresh, t0, int64(lease))
	}
	probing.Wait()
}

// probeFree claims probe on other from the crash at t0 on (invariant 5),
// then stops what it claimed.
func (w *world) probeFree(ctx context.Context, probe *nameState, other *replica, t0 time.Time, lease int64) {
	// Beside the claim, when etcd let the crashed replica's lease go: the
	// claim can only follow it.
	gone := make(chan time.Duration, 1)
	pctx, stopPoll := context.WithCancel(ctx)
	go func() {
		for pctx.Err() == nil && w.f.leaseAlive(lease) {
			time.Sleep(2 * time.Millisecond)
		}
		gone <- time.Since(t0)
	}()
	var got *held
	took, _ := w.crash.probe(ctx, probe.name, t0, 2*time.Millisecond, w.cfg.TTL+5*time.Second, func(context.Context) error {
		h, err := w.start(other, probe, true)
		got = h
		return err
	})
	stopPoll()
	leaseGone := <-gone
	if took >= 0 {
		w.freeMu.Lock()
		w.freeTimes = append(w.freeTimes, took)
		w.leaseTimes = append(w.leaseTimes, leaseGone)
		w.freeMu.Unlock()
	}
	if got != nil {
		w.end(got, shapeStop)
	}
}

// revokeSession revokes r's lease from the run's own client: etcd deletes
// r's keys at once, and r, whose next keepalive fails, kills its consumers
// and opens a new session.
func (w *world) revokeSession(r *replica) {
	lost, lease := r.rep.SessionsLost(), r.rep.Lease()
	if lease == clientv3.NoLease {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := w.f.direct.Revoke(ctx, lease)
	cancel()
	if err != nil {
		w.t.Unexpected("revoke the lease of %s: %v", r.name, err)
		return
	}
	w.revokeLosses.Add(1)
	if err := waitSession(r, lost, w.cfg.TTL+10*time.Second); err != nil {
		w.t.Unexpected("%v", err)
	}
}

// cutSession cuts r off from etcd for longer than the TTL: the server
// expires its lease, r's client gives the lease up, and r kills its
// consumers; once the cut heals r opens a new session.
func (w *world) cutSession(r *replica) {
	lost := r.rep.SessionsLost()
	r.cut()
	time.Sleep(w.cfg.TTL + 300*time.Millisecond)
	r.restore()
	w.cutLosses.Add(1)
	if err := waitSession(r, lost, w.cfg.TTL+10*time.Second); err != nil {
		w.t.Unexpected("%v", err)
	}
}

// sampler gets the prefix every interval and judges it (invariant 1).
func (w *world) sampler(ctx context.Context, interval time.Duration) {
	wait.Every(ctx, interval, func() { w.sampleOnce(ctx) })
}

// sampleOnce judges one Get of the tool claims against the consumers that
// were judgeable before it began.
func (w *world) sampleOnce(ctx context.Context) {
	var cands []*record
	for _, ns := range w.names {
		ns.mu.Lock()
		for _, rec := range ns.winners {
			if judgeable(rec) {
				cands = append(cands, rec)
			}
		}
		ns.mu.Unlock()
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := w.f.direct.Get(gctx, w.f.toolDir(), clientv3.WithPrefix())
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			w.t.Unexpected("get %s: %v", w.f.toolDir(), err)
		}
		return
	}
	kvs := make([]kv, len(resp.Kvs))
	for i, e := range resp.Kvs {
		kvs[i] = kv{key: string(e.Key), value: e.Value, lease: e.Lease}
	}
	claims := w.claims.parseClaims(resp.Header.Revision, w.f.toolDir(), kvs)
	w.claims.sample(resp.Header.Revision, cands, claims)
	w.judgeLostClaims()
}

// judgeLostClaims judges every consumer of the run whose claim's session
// its replica has lost (invariant 7).
func (w *world) judgeLostClaims() {
	w.recs.Range(func(_, v any) bool {
		w.lost.judge(v.(*record))
		return true
	})
}

// watcher follows every delete under the tool prefix from rev on
// (invariant 2), and every put that creates a key (the lease of each
// consumer's claim, for invariant 7), until ctx ends.
func (w *world) watcher(ctx context.Context, rev int64) {
	wch := w.f.direct.Watch(clientv3.WithRequireLeader(ctx), w.f.toolDir(), clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev))
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if ctx.Err() == nil {
				w.t.Unexpected("watch %s: %v", w.f.toolDir(), err)
			}
			continue
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut && ev.Kv.Version == 1 {
				w.lost.created(string(ev.Kv.Key), ev.Kv.Value, ev.Kv.Lease)
				continue
			}
			if ev.Type != clientv3.EventTypeDelete || ev.PrevKv == nil {
				continue
			}
			w.release.deleted(ev.Kv.ModRevision, kv{key: string(ev.PrevKv.Key), value: ev.PrevKv.Value, lease: ev.PrevKv.Lease})
		}
	}
}
