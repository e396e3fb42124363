package etcdfleet

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// View returns the replica's view of the fleet's claims.
func (r *Replica) View() *View { return r.view }

// list reads every claim under the prefix in one Get and resets the view
// to the records it admits, returning the revision it reflects. A listing
// that began under a session, with no loss since, shows a view that a
// lost session hid (see lose). Claims of this replica found changed are
// repaired.
func (r *Replica) list(ctx context.Context) (int64, error) {
	r.mu.Lock()
	live := r.sess != nil
	r.mu.Unlock()
	gen := r.view.hideGen()
	resp, err := r.cli.Get(ctx, r.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, unavailable(err)
	}
	rev := resp.Header.Revision
	recs := make(map[string]Record, len(resp.Kvs))
	kvs := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	// Enrollments and revocations first: the records of one revision are
	// judged by the enrollments of that revision, whatever their order.
	// Revocations seen before stay (see noteIdentity).
	r.trust.reg.byName = map[string]enrolled{}
	for _, kv := range resp.Kvs {
		if r.identityDir(string(kv.Key)) != "" {
			r.noteIdentity(kv, false, map[string]bool{})
		}
	}
	r.trust.publish()
	for _, kv := range resp.Kvs {
		if r.identityDir(string(kv.Key)) != "" {
			continue
		}
		kvs[string(kv.Key)] = kv
		if rec, ok := r.admit(kv); ok {
			recs[string(kv.Key)] = rec
		}
	}
	// Forget the renewals of replicas whose membership is gone.
	for name := range r.trust.alive {
		if _, ok := kvs[r.cfg.Prefix+"/replicas/"+url.PathEscape(name)]; !ok {
			delete(r.trust.alive, name)
		}
	}
	r.view.reset(recs, rev, live, gen)
	r.mu.Lock()
	keys := make([]string, 0, len(r.trust.held))
	for k := range r.trust.held {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		if c := r.tampered(k, kvs[k], rev); c != nil {
			r.repair(c)
		}
	}
	return rev, nil
}

// watchSynced opens a watch on the prefix from the current revision and
// waits, within ctx, for etcd to confirm it. A watch from the current
// revision is in etcd's synced group from the start; one from a revision
// already past waits for etcd's catch-up loop, which runs every 100 ms.
// So a listing is taken after its watch opens, never before: the watch
// then misses nothing that happened after the listing, and the follower
// skips what it sees again (see follow).
func (r *Replica) watchSynced(ctx context.Context) (clientv3.WatchChan, context.CancelFunc, error) {
	// The watch lives with the replica, but ctx bounds its opening: the
	// client's Watch itself waits for a connection.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(r.ctx))
	unbound := context.AfterFunc(ctx, cancel)
	wch := r.cli.Watch(wctx, r.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	resp, ok := <-wch
	if unbound() && ok && resp.Created && resp.Err() == nil {
		return wch, cancel, nil
	}
	cancel()
	switch {
	case ctx.Err() != nil:
		return nil, nil, unavailable(ctx.Err())
	case !ok:
		return nil, nil, unavailable(cmp.Or(r.ctx.Err(), errWatchClosed))
	}
	return nil, nil, unavailable(cmp.Or(resp.Err(), errWatchClosed))
}

// errWatchClosed is a watch that ended before etcd confirmed it.
var errWatchClosed = errors.New("watch closed before it was created")

// watchAndList opens a synced watch, then lists: the listing's revision
// and the watch to follow from it.
func (r *Replica) watchAndList(ctx context.Context) (int64, clientv3.WatchChan, context.CancelFunc, error) {
	wch, cancel, err := r.watchSynced(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	if r.beforeList != nil {
		r.beforeList()
	}
	rev, err := r.list(ctx)
	if err != nil {
		cancel()
		return 0, nil, nil, err
	}
	return rev, wch, cancel, nil
}

// follow keeps the view up to date from rev, the revision of the listing
// that wch (a watch opened before that listing) follows: events at or
// below rev are in the listing already and are skipped. A watch that ends
// is opened again from the revision after the last one seen, requiring a
// leader so that a member cut off from the cluster does not keep it
// waiting forever. A new session, or revisions compacted away, mean a new
// watch and a new listing, at once. It returns when the replica closes.
func (r *Replica) follow(rev int64, wch clientv3.WatchChan, cancel context.CancelFunc) {
	defer close(r.followDone)
	backoff := 10 * time.Millisecond
	sweep := time.NewTicker(r.renewEvery())
	defer sweep.Stop()
	for r.ctx.Err() == nil {
		if wch == nil {
			var wctx context.Context
			wctx, cancel = context.WithCancel(clientv3.WithRequireLeader(r.ctx))
			wch = r.cli.Watch(wctx, r.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		}
		relist := r.consume(wch, cancel, &rev, &backoff, sweep.C)
		cancel()
		wch = nil
		if !relist {
			r.sleep(&backoff)
			continue
		}
		for r.ctx.Err() == nil {
			ctx, done := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
			got, w, c, err := r.watchAndList(ctx)
			done()
			if err == nil {
				rev, wch, cancel = got, w, c
				break
			}
			r.cfg.Logger.Warn("etcdfleet: list", zap.Error(err))
			r.sleep(&backoff)
		}
	}
}

// consume applies wch's events past *rev to the view until the watch ends,
// and reports whether the follower must list again.
func (r *Replica) consume(wch clientv3.WatchChan, cancel context.CancelFunc, rev *int64, backoff *time.Duration, sweep <-chan time.Time) (relist bool) {
	for {
		select {
		case now := <-sweep:
			r.sweepStale(now)
		case <-r.trust.relist:
			// A new session: list afresh, which shows the view again
			// (see lose).
			return true
		case <-r.pause:
			// Tests: hold the follower, its watch cancelled, until told
			// to go on from where it was.
			cancel()
			select {
			case <-r.pause:
			case <-r.ctx.Done():
			}
			return false
		case resp, ok := <-wch:
			if !ok {
				return false
			}
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				return true
			}
			if err := resp.Err(); err != nil {
				r.cfg.Logger.Warn("etcdfleet: watch", zap.Error(err))
				return false
			}
			evs := resp.Events
			for len(evs) > 0 && evs[0].Kv.ModRevision <= *rev {
				evs = evs[1:] // in the listing already
			}
			if len(evs) > 0 {
				if f := r.beforeApply.Load(); f != nil {
					(*f)(eventKeys(evs))
				}
				*rev = r.applyEvents(evs)
				*backoff = 10 * time.Millisecond
			}
		}
	}
}

// eventKeys returns the keys evs touch, in order (tests' beforeApply).
func eventKeys(evs []*clientv3.Event) []string {
	keys := make([]string, len(evs))
	for i, ev := range evs {
		keys[i] = string(ev.Kv.Key)
	}
	return keys
}

// applyEvents applies a watch response's events to the view and returns
// the revision of the last one. A put of a record the replica does not
// admit deletes its key from the view: whatever the key held before is
// gone from etcd. A change to one of this replica's own claims that the
// claim did not make is repaired, once the view is applied.
func (r *Replica) applyEvents(evs []*clientv3.Event) int64 {
	puts := make(map[string]*Record, len(evs))
	var (
		rev    int64
		repair []*claim
	)
	// Enrollments and revocations first (see list). A replica whose
	// enrollment changed, went or was revoked loses every record the view
	// holds of it; those it signs under a new enrollment come after it.
	dirty, identities := map[string]bool{}, false
	for _, ev := range evs {
		rev = ev.Kv.ModRevision
		if r.identityDir(string(ev.Kv.Key)) != "" {
			r.noteIdentity(ev.Kv, ev.Type == clientv3.EventTypeDelete, dirty)
			identities = true
		}
	}
	if identities {
		// Published even when no replica is dirty: a new session's
		// enrollment moves to a new lease, which Revoke revokes.
		r.trust.publish()
	}
	for _, k := range r.view.keysOf(dirty) {
		puts[k] = nil
	}
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		if r.identityDir(key) != "" {
			continue
		}
		kv := ev.Kv
		if ev.Type == clientv3.EventTypeDelete {
			kv = nil
			puts[key] = nil
			if name, ok := strings.CutPrefix(key, r.cfg.Prefix+"/replicas/"); ok {
				if name, err := url.PathUnescape(name); err == nil {
					delete(r.trust.alive, name)
				}
			}
		} else if rec, ok := r.admit(ev.Kv); ok {
			if _, pending := puts[key]; pending || !r.view.renewal(key, rec) {
				puts[key] = &rec
			}
		} else {
			puts[key] = nil
		}
		if c := r.tampered(key, kv, ev.Kv.ModRevision); c != nil && !slices.Contains(repair, c) {
			repair = append(repair, c)
		}
	}
	if len(puts) == 0 {
		// Renewals alone: nothing any reader of the view sees changed.
		r.view.advance(rev)
	} else {
		r.view.apply(puts, rev)
	}
	for _, c := range repair {
		r.repair(c)
	}
	return rev
}

// sleep waits out *backoff, doubling it up to a second, or until the
// replica closes.
func (r *Replica) sleep(backoff *time.Duration) {
	select {
	case <-r.ctx.Done():
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, time.Second)
}
