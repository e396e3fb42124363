package etcdfleet

import (
	"context"
	"errors"
	"slices"
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
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = kv
		if rec, ok := r.admit(kv); ok {
			recs[string(kv.Key)] = rec
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

// follow keeps the view up to date: a watch on the prefix from the
// revision after the last one seen, requiring a leader so that a member cut
// off from the cluster does not keep the watch waiting forever. When the
// revisions it needs were compacted away, it lists again and watches from
// there. It returns when the replica closes.
func (r *Replica) follow(rev int64) {
	defer close(r.followDone)
	backoff := 10 * time.Millisecond
	for r.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(r.ctx))
		wch := r.cli.Watch(wctx, r.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		relist := false
	watch:
		for {
			select {
			case <-r.trust.relist:
				// A new session: list afresh, which shows the view
				// again (see lose).
				relist = true
				break watch
			case <-r.pause:
				// Tests: hold the follower, its watch cancelled, until
				// told to go on from where it was.
				cancel()
				select {
				case <-r.pause:
				case <-r.ctx.Done():
				}
				break watch
			case resp, ok := <-wch:
				if !ok {
					break watch
				}
				if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
					relist = true
					break watch
				}
				if err := resp.Err(); err != nil {
					r.cfg.Logger.Warn("etcdfleet: watch", zap.Error(err))
					break watch
				}
				if len(resp.Events) > 0 {
					rev = r.applyEvents(resp.Events)
					backoff = 10 * time.Millisecond
				}
			}
		}
		cancel()
		for relist && r.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
			got, err := r.list(ctx)
			cancel()
			if err == nil {
				rev, relist = got, false
				break
			}
			r.cfg.Logger.Warn("etcdfleet: list", zap.Error(err))
			r.sleep(&backoff)
		}
		r.sleep(&backoff)
	}
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
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		rev = ev.Kv.ModRevision
		kv := ev.Kv
		if ev.Type == clientv3.EventTypeDelete {
			kv = nil
			puts[key] = nil
		} else if rec, ok := r.admit(ev.Kv); ok {
			puts[key] = &rec
		} else {
			puts[key] = nil
		}
		if c := r.tampered(key, kv, rev); c != nil && !slices.Contains(repair, c) {
			repair = append(repair, c)
		}
	}
	r.view.apply(puts, rev)
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
