package etcdfleet_test

import (
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

func advertising(t *testing.T, ep, name, endpoint string) *etcdfleet.Replica {
	t.Helper()
	return joinConfig(t, etcdfleet.Config{Endpoints: []string{ep}, Prefix: prefix, Token: fleetToken, TTL: time.Second,
		Replica: name, Advertise: endpoint})
}

// Locate places a task's holder as the view has it: here for this
// process's own stamp; live while the holder's membership of the same
// incarnation stands; unknown while the view is behind the stamp; lost
// once the view is past it with no such membership, its lease expired or
// its name taken by another process; and a replica that advertises no
// endpoint stamps nothing.
func TestLocate(t *testing.T) {
	ep := startEtcd(t)
	const bEndpoint = "http://127.0.0.1:2/fleet"
	a := advertising(t, ep, "a", "http://127.0.0.1:1/fleet")
	if _, ok := join(t, ep, "silent").Stamp(); ok {
		t.Error("a replica that advertises no endpoint stamped a task")
	}
	own, ok := a.Stamp()
	if !ok {
		t.Fatal("a replica between no sessions stamped nothing")
	}
	if _, where := a.Locate(own); where != catalog.HolderHere {
		t.Fatalf("a's own stamp: %v, want here", where)
	}

	// b joins while a's view is held back: behind b's stamp, unknown.
	resume := a.PauseFollower()
	b := advertising(t, ep, "b", bEndpoint)
	stamp, ok := b.Stamp()
	if !ok {
		t.Fatal("b stamped nothing")
	}
	if _, where := a.Locate(stamp); where != catalog.HolderUnknown {
		t.Fatalf("b's stamp on a view behind it: %v, want unknown", where)
	}
	resume()
	waitView(t, a.View(), "b's membership seen", func() bool { _, w := a.Locate(stamp); return w != catalog.HolderUnknown })
	if got, where := a.Locate(stamp); where != catalog.HolderLive || got != bEndpoint {
		t.Fatalf("b's stamp once seen: %q %v, want %s live", got, where, bEndpoint)
	}

	// b crashes: live until its lease expires, then lost, at the
	// endpoint the stamp recorded.
	b.Crash()
	crashed := time.Now()
	if _, where := a.Locate(stamp); where != catalog.HolderLive {
		t.Fatalf("a crashed holder before its lease expired: %v, want live", where)
	}
	waitView(t, a.View(), "b's lease expired", func() bool { _, w := a.Locate(stamp); return w != catalog.HolderLive })
	if got, where := a.Locate(stamp); where != catalog.HolderLost || got != bEndpoint {
		t.Fatalf("a crashed holder after its lease expired: %q %v, want lost at %s", got, where, bEndpoint)
	}
	t.Logf("a crashed holder read lost %v after the crash (TTL 1 s)", time.Since(crashed).Round(time.Millisecond))

	// A new process named b: its predecessor's stamp names a holder that
	// is lost, on a and on the new b alike.
	b2 := advertising(t, ep, "b", bEndpoint)
	waitView(t, a.View(), "the new b's membership seen", func() bool {
		s2, _ := b2.Stamp()
		_, w := a.Locate(s2)
		return w == catalog.HolderLive
	})
	for _, r := range []*etcdfleet.Replica{a, b2} {
		if _, where := r.Locate(stamp); where != catalog.HolderLost {
			t.Errorf("%s: a predecessor's stamp: %v, want lost", r.Name(), where)
		}
	}
	if _, where := a.Locate("not a stamp"); where != catalog.HolderLost {
		t.Errorf("a stamp that does not decode: %v, want lost", where)
	}
}
