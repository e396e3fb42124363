package shardreg_test

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/shardreg"
)

// guard bounds every wait for something that must happen, so that a broken
// interleaving fails its test within seconds instead of hanging it.
const guard = 2 * time.Second

// A write cannot slip past a freeze. A write announces its section and then
// looks whether a listing holds writes off; a freezing listing raises its
// flag and then waits for the sections announced: one of the two sees the
// other. The test holds a register between those two steps, makes a
// listing freeze meanwhile (writes between its scans keep it from
// validating, as a stream of writes would), and then lets the register go
// on while the listing is frozen. The register must wait at the gate until
// the listing is done; it must not complete while the listing is frozen.
// It catches a write that checks the flag before it announces itself: the
// freeze then finds nothing to wait for, and the write lands while the
// listing reads a map it believes to be still.
func TestWriteCannotSlipPastAFreeze(t *testing.T) {
	r := newReg(t)
	start(t, r, "a", live(t))
	writer := live(t)
	var armed atomic.Bool
	inWindow, goOn := make(chan struct{}), make(chan struct{})
	atGate := make(chan struct{})
	var gateOnce sync.Once
	wrote := make(chan error, 1)
	var slipped, sawFrozenScan bool
	r.SetHook(func(p shardreg.HookPoint) {
		switch p {
		case shardreg.HookAnnounced:
			if armed.CompareAndSwap(true, false) {
				close(inWindow)
				<-goOn
			}
		case shardreg.HookGateWait:
			gateOnce.Do(func() { close(atGate) })
		case shardreg.HookListScanned:
			if !r.Frozen() {
				// A write completed during the scan: it cannot validate.
				r.OpenSectionOn(0)(true)
				return
			}
			sawFrozenScan = true
			select {
			case <-atGate:
			case err := <-wrote:
				wrote <- err
				slipped = true
			case <-time.After(guard):
			}
		}
	})
	armed.Store(true)
	go func() { wrote <- r.RegisterReady("w", "v:w", writer.Ref()) }()
	select {
	case <-inWindow:
	case <-time.After(guard):
		t.Fatal("the register never announced its write section")
	}
	listed := make(chan []shardreg.Entry[string], 1)
	go func() { listed <- r.ListReady() }()
	for deadline := time.Now().Add(guard); !r.Frozen(); runtime.Gosched() {
		if time.Now().After(deadline) {
			close(goOn)
			t.Fatal("the listing never froze")
		}
	}
	close(goOn)
	var got []shardreg.Entry[string]
	select {
	case got = <-listed:
	case <-time.After(guard):
		t.Fatal("the listing never returned")
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("err: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("the register never returned")
	}
	r.SetHook(nil)
	if !sawFrozenScan {
		t.Fatal("the listing must scan frozen: sawFrozenScan = false, want true")
	}
	if slipped {
		t.Error("a write completed while a listing held writes off: slipped = true, want false")
	}
	if got := names(got); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the listing's instant came before the write: names(got) = %v, want %v", got, []string{"a"})
	}
}
