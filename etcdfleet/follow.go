package etcdfleet

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// View returns the replica's view of the fleet's claims.
func (r *Replica) View() *View { return r.view }

// list reads every claim under the prefix in one Get and resets the view
// to it, returning the revision it reflects.
func (r *Replica) list(ctx context.Context) (int64, error) {
	resp, err := r.cli.Get(ctx, r.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, unavailable(err)
	}
	recs := make(map[string]Record, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if rec, err := DecodeRecord(kv.Value); err == nil {
			recs[string(kv.Key)] = rec
		} else {
			r.cfg.Logger.Warn("etcdfleet: undecodable claim", zap.ByteString("key", kv.Key), zap.Error(err))
		}
	}
	r.view.reset(recs, resp.Header.Revision)
	return resp.Header.Revision, nil
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
// the revision of the last one.
func (r *Replica) applyEvents(evs []*clientv3.Event) int64 {
	puts := make(map[string]*Record, len(evs))
	var rev int64
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		rev = ev.Kv.ModRevision
		if ev.Type == clientv3.EventTypeDelete {
			puts[key] = nil
			continue
		}
		rec, err := DecodeRecord(ev.Kv.Value)
		if err != nil {
			r.cfg.Logger.Warn("etcdfleet: undecodable claim", zap.String("key", key), zap.Error(err))
			puts[key] = nil
			continue
		}
		puts[key] = &rec
	}
	r.view.apply(puts, rev)
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
