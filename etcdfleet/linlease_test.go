package etcdfleet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A replica's lease can lapse without the test's expire: when the process
// stalls for longer than the TTL (the race detector on a loaded machine
// does), the keepalives stop, the client gives the lease up, and the
// replica loses its session, kills its consumers and revokes the lease,
// exactly as after an expire. A history that leaves such a loss out is
// one the model must reject (a key gone, a start refused with "other
// error" on a replica never expired), so the recorder records each one as
// an expire of the replica, with a real-time window wide enough to hold
// the moment the lease's keys went: from before the lease was granted to
// after the replica had revoked it and opened its next session.

// linLease is what a slot knows of its incarnation's sessions. Only the
// slot's goroutine touches it.
type linLease struct {
	cur clientv3.LeaseID // the lease the last poll saw current
	// since is a moment before cur was granted: a loss of cur, or of a
	// lease after it, happened after since.
	since time.Time
	// polled is when the last poll that saw a lease began.
	polled time.Time
	// revoked holds the leases the test's expire revoked: their losses
	// are in the history already.
	revoked  map[clientv3.LeaseID]bool
	recorded int // losses recorded as expires
}

// reset starts tracking a new incarnation, joined after joining.
func (l *linLease) reset(joining time.Time) {
	*l = linLease{since: joining, polled: joining, revoked: map[clientv3.LeaseID]bool{}}
}

// pollLease records as expires the sessions the slot's replica lost since
// the last poll that the test did not revoke. It counts a loss only once
// the replica runs on a later lease, and once etcd no longer has the lease
// the poll last saw: the replica's own revoke may have timed out, and then
// the keys go only at the lease's expiry. The window ends after they went.
// It costs a lease query per lease change.
func (h *linRecorder) pollLease(s *linSlot) error {
	began := time.Now()
	// Losses first: a lease current after them was installed after each
	// counted loss's revoke.
	lost := s.r.SessionsLost()
	cur := s.r.Lease()
	if cur == clientv3.NoLease {
		return nil // between sessions: the next one may be granted already
	}
	l := &s.lease
	expected := 0
	for id := range l.revoked {
		if id != cur {
			expected++
		}
	}
	if n := lost - expected; n > l.recorded {
		if err := h.waitLeaseGone(l.cur); err != nil {
			return err
		}
		ret := time.Now()
		for ; l.recorded < n; l.recorded++ {
			h.lapsed.Add(1)
			h.recordAt(s.id, linInput{op: opExpire, rep: s.rep}, l.since, ret, linOutput{out: outOK})
		}
	}
	if cur != l.cur {
		// The last poll saw another lease, so cur was granted after it.
		l.cur, l.since = cur, l.polled
	}
	l.polled = began
	return nil
}

// waitLeaseGone waits, within patience, until etcd no longer has lease id.
func (h *linRecorder) waitLeaseGone(id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for {
		ttl, err := h.cli.TimeToLive(ctx, id)
		if err != nil {
			return err
		}
		if ttl.TTL < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease %x still alive after %v", id, patience)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// settleLease, at the end of a history, records the losses of the slot's
// replica that the history may have seen and the slot's polls did not:
// it waits out a session change under way, and asks etcd whether the
// current lease is still alive, as the replica may not have noticed yet.
func (h *linRecorder) settleLease(s *linSlot) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for s.r.Lease() == clientv3.NoLease {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := h.pollLease(s); err != nil {
		return err
	}
	l := &s.lease
	ttl, err := h.cli.TimeToLive(ctx, l.cur)
	if err != nil {
		return err
	}
	if ttl.TTL < 0 && !l.revoked[l.cur] {
		h.lapsed.Add(1)
		h.recordAt(s.id, linInput{op: opExpire, rep: s.rep}, l.since, time.Now(), linOutput{out: outOK})
	}
	return nil
}

// TestLinearizableLapsedLease records a history in which the replica's
// lease lapses behind the test's back, as under a stall longer than the
// TTL: the replica holds n0, its keepalives stop, and a get then finds n0
// free. Without the expire the recorder adds for the loss, no order of
// the history fits the model.
func TestLinearizableLapsedLease(t *testing.T) {
	ep := startEtcd(t)
	life, end := context.WithCancel(context.Background())
	defer end()
	h := &linRecorder{ep: ep, cli: client(t, ep), prefix: "/lapse", p: linParams{capacity: linNames}, life: life}
	s := &linSlot{rng: rand.New(rand.NewPCG(1, 2))}
	if err := h.incarnate(s); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.r.Close(context.Background()) }()
	h.base = time.Now()
	if err := h.pollLease(s); err != nil {
		t.Fatal(err)
	}
	if err := h.start(s, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.pollLease(s); err != nil {
		t.Fatal(err)
	}
	old := s.r.Lease()
	s.r.OrphanSession()
	for deadline := time.Now().Add(patience); ; time.Sleep(10 * time.Millisecond) {
		if l := s.r.Lease(); l != old && l != clientv3.NoLease {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session after %v", patience)
		}
	}
	if err := h.get(s, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.settleLease(s); err != nil {
		t.Fatal(err)
	}
	expires := 0
	for _, op := range h.ops {
		switch in, out := op.Input.(linInput), op.Output.(linOutput); {
		case in.op == opExpire:
			expires++
		case in.op == opGet && out.holder != linNoOwner:
			t.Fatalf("n0 still held by o%d after its lease lapsed", out.holder)
		case in.op == opStart && out.out != outOK:
			t.Fatalf("start: %s", linOutNames[out.out])
		}
	}
	if expires != 1 {
		t.Errorf("%d expires recorded for one lapsed lease, want 1", expires)
	}
	checkHistory(t, linModel(linStep, linNames), h.ops, "lapsed lease")
}
