package etcdfleet

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
)

// put writes a claim's key, with val, on lease, only if the key does not
// exist and, with Config.Cap set, only while fewer than Cap keys of kind
// exist fleet-wide. It returns the key's create revision; or a refusal
// (catalog.ErrDuplicate, catalog.ErrCapReached), nothing written; or
// etcd's error, the outcome unknown.
//
// Without a cap it is one Txn: create if absent. With one, the decision
// is made at one revision. A read Txn gets the key and the count of the
// kind's keys at revision R: a key that exists is a duplicate, a count at
// the cap a refusal, both true at R. Otherwise the put Txn requires the
// key absent and no key of the kind modified after R. A key created or
// rewritten since R fails that compare; a key deleted since R passes it
// and only lowers the count. So when the put commits the kind holds at
// most the count read at R, under the cap, and the cap holds at every
// revision whatever the replicas race. A failed compare returns the same
// two reads, at the new revision, and the claim decides again from there:
// each retry means another claim of the kind committed meanwhile, so the
// fleet made progress, and ctx bounds the retries.
//
// A slot is a key: it is freed when the key goes. A consumer that stops
// or dies on a live replica frees it with its release, one Txn after the
// death; a crashed or partitioned replica's keys hold their slots until
// its lease expires (Config.TTL, and the server's detection).
func (r *Replica) put(ctx context.Context, kind catalog.Kind, key, val string, lease clientv3.LeaseID) (rev int64, refused error, err error) {
	absent := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	write := clientv3.OpPut(key, val, clientv3.WithLease(lease))
	if r.cfg.Cap == 0 {
		resp, err := r.cli.Txn(ctx).If(absent).Then(write).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return 0, nil, err
		}
		if !resp.Succeeded {
			return 0, duplicate(resp.Responses[0].GetResponseRange()), nil
		}
		return resp.Header.Revision, nil, nil
	}
	dir, err := r.dir(kind)
	if err != nil {
		return 0, err, nil
	}
	reads := []clientv3.Op{clientv3.OpGet(key), clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithCountOnly())}
	resp, err := r.cli.Txn(ctx).Then(reads...).Commit()
	for {
		if err != nil {
			return 0, nil, err
		}
		at := resp.Header.Revision
		held, count := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange().GetCount()
		switch {
		case len(held.GetKvs()) > 0:
			return 0, duplicate(held), nil
		case count >= int64(r.cfg.Cap):
			return 0, fmt.Errorf("%w: %d of %d %ss claimed fleet-wide at revision %d", errCapReached, count, r.cfg.Cap, kind, at), nil
		}
		unchanged := clientv3.Compare(clientv3.ModRevision(dir), "<", at+1).WithPrefix()
		resp, err = r.cli.Txn(ctx).If(absent, unchanged).Then(write).Else(reads...).Commit()
		if err == nil && resp.Succeeded {
			return resp.Header.Revision, nil, nil
		}
	}
}

// duplicate is the refusal of a claim whose key exists, naming the holder
// the key records.
func duplicate(held *etcdserverpb.RangeResponse) error {
	holder := "another owner"
	if kvs := held.GetKvs(); len(kvs) == 1 {
		if rec, err := DecodeRecord(kvs[0].Value); err == nil {
			holder = fmt.Sprintf("owner %d on replica %q", rec.Owner, rec.Replica)
		}
	}
	return fmt.Errorf("%w: held by %s", errDuplicate, holder)
}
