package etcdfleet_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A claim whose put succeeded under a session that is lost before the
// claim registers never registers. The loss has already killed every
// consumer registered under the session and revoked its lease: a claim
// registered after that would be held by nobody in etcd, and no later
// loss would kill its consumer, which would serve a name any replica may
// claim. So the start fails with ErrSessionLost and leaves nothing behind,
// and the name starts again on the new session.
//
// The interleaving is fixed, not raced for: the claim is parked between
// its put and its re-check of the session, the session is lost and its
// loss handled in full, and only then does the claim go on.
func TestClaimAcrossSessionLossNeverRegisters(t *testing.T) {
	ep := startEtcd(t)
	cli := client(t, ep)
	a := newReplica(t, ep, "a")
	life := lifeFor(t)
	before := a.mustStart(t, life, "before") // the loss must kill it
	parked, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once // only the first claim of the name is parked
	a.SetClaimPut(func(key string) {
		if key != toolKey("across") {
			return
		}
		once.Do(func() {
			close(parked)
			<-goOn
		})
	})
	old := a.Lease()
	type started struct {
		k   *catalog.Consumer
		err error
	}
	res := make(chan started, 1)
	go func() {
		k, err := a.start(life, "across")
		res <- started{k, err}
	}()
	select {
	case <-parked:
	case <-time.After(patience):
		t.Fatal("the claim never reached its put")
	}
	if got := holder(t, cli, toolKey("across")); got != "a" {
		t.Fatalf("the parked claim's key is held by %q, want a", got)
	}

	a.OrphanSession()
	waitDone(t, before)
	// The supervisor opens the new session only once lose has returned:
	// a new lease means the old session's consumers were killed and its
	// lease revoked, before the parked claim goes on.
	deadline := time.Now().Add(patience)
	for l := a.Lease(); l == clientv3.NoLease || l == old; l = a.Lease() {
		if time.Now().After(deadline) {
			t.Fatalf("no new session %v after the loss", patience)
		}
		time.Sleep(time.Millisecond)
	}
	close(goOn)

	var got started
	select {
	case got = <-res:
	case <-time.After(patience):
		t.Fatal("the claim did not return once let go")
	}
	if !errors.Is(got.err, etcdfleet.ErrSessionLost) {
		alive := got.k != nil
		if alive {
			select {
			case <-got.k.Done():
				alive = false
			default:
			}
		}
		t.Fatalf("a claim put under a session lost before it registered: start returned %v, want ErrSessionLost; its consumer alive: %v, claims held under the new session: %d",
			got.err, alive, a.Claims())
	}
	if n := a.Claims(); n != 0 {
		t.Fatalf("%d claims registered under the new session, want 0", n)
	}
	if st := a.cat.Stats(); st.Tools != 0 || st.ToolSlots != 0 {
		t.Fatalf("the failed start left %d tools in %d slots", st.Tools, st.ToolSlots)
	}
	if got := holder(t, cli, toolKey("across")); got != "" {
		t.Fatalf("the key of the failed claim is held by %q: the lost lease's revoke should have taken it", got)
	}
	// The name is free: its next start claims it on the new session.
	a.mustStart(t, life, "across")
	if a.Claims() != 1 {
		t.Fatalf("claims after a fresh start: %d, want 1", a.Claims())
	}
}
