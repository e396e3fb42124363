package inproc

import (
	"testing"
)

// Invariant 12: a live holder's update reaches the listener once, and an
// update by a consumer observed dead is refused and reaches nobody, even
// while a live successor holds its URI.
func TestCheckerResourceUpdate(t *testing.T) {
	for _, k := range kinds(bugUpdateDead, bugUpdateDropped) {
		for _, sh := range []shape{shapeStop, shapeCancel, shapePanic} {
			t.Run(k.name+"/"+sh.String(), func(t *testing.T) {
				w := newTestWorld(t, k, kindsConfig())
				defer w.unlisten()
				ns := w.resources[0]
				h := mustStart(t, w, ns, true)
				w.publish(h)
				endBy(t, w, h, sh)
				w.publish(h)
				if sh != shapeStop {
					// The dead consumer publishes while its successor lives.
					succ := mustStart(t, w, ns, true)
					w.publish(h)
					w.publish(succ)
					endBy(t, w, succ, shapeStop)
				}
				verdict(t, w, k, InvResourceUpdate)
				if !k.buggy {
					want := int64(1) // the live holder's; with a successor, its too
					if sh != shapeStop {
						want = 2
					}
					if got, want := w.updatesPublished.Load(), want; got != want {
						t.Errorf("w.updatesPublished.Load() = %v, want %v", got, want)
					}
				}
			})
		}
	}
}

// Only Updated calls publish: a tool consumer's is refused, and the
// listener hears nothing else.
func TestCheckerResourceUpdateOtherKinds(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			w := newTestWorld(t, k, kindsConfig())
			defer w.unlisten()
			h := mustStart(t, w, w.names[0], true)
			w.publish(h) // not a resource: not called
			if h.k.Updated() == nil {
				t.Errorf("h.k.Updated() = nil, want an error")
			}
			endBy(t, w, h, shapeStop)
			if got := w.t.Violations(InvResourceUpdate); got != 0 {
				t.Errorf("w.t.Violations(InvResourceUpdate) = %v, want 0", got)
			}
			if got := w.updatesPublished.Load() + w.updatesRefused.Load(); got != 0 {
				t.Errorf("w.updatesPublished.Load()+w.updatesRefused.Load() = %v, want 0", got)
			}
		})
	}
}

// The listener's own half of invariant 12: an update that no loadgen
// Updated call in flight published, or of a URI no loadgen consumer
// serves, is a violation.
func TestCheckerResourceUpdateStray(t *testing.T) {
	tests := []struct {
		name string
		uri  func(w *world) string
		open bool
		want int64
	}{
		{"during a call", func(w *world) string { return w.resources[0].name }, true, 0},
		{"no call in flight", func(w *world) string { return w.resources[0].name }, false, 1},
		{"unknown URI", func(*world) string { return "lg://nobody" }, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWorld(t, systemKind{name: "fake"}, kindsConfig())
			defer w.unlisten()
			uri := tt.uri(w)
			if s := w.upd.byURI[uri]; s != nil {
				s.open.Store(tt.open)
			}
			w.upd.heard(uri)
			if got, want := w.t.Violations(InvResourceUpdate), tt.want; got != want {
				t.Errorf("%v: w.t.Violations(InvResourceUpdate) = %v, want %v", w.t.Examples(InvResourceUpdate), got, want)
			}
		})
	}
}
