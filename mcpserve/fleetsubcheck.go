package mcpserve

import (
	"context"

	"github.com/livereg/livereg/owner"
)

// recheckRemote runs on rechecker's goroutine: it looks up again where
// the URIs other replicas serve are served (all of them after a change
// of the view, or those a peer refused). A URI now served here becomes a
// local subscription; one another replica serves moves to that replica's
// stream; one served nowhere, or refused by the peer the view still
// names, is dropped with its subscribers, who are told once, as for a
// local owner's death without a successor (recheck). A URI that moves is
// told too, since its new holder's resource may differ: once the new
// holder's stream acknowledged it, when it moves to another replica, so
// that nothing the new holder publishes before goes unheard. It costs a lookup per
// URI, made with no lock held.
func (t *subscriptions) recheckRemote() {
	fs := t.fleet
	type look struct {
		uri   string
		was   *peerStream
		now   owner.Ref
		local bool
		ep    string
	}
	t.mu.Lock()
	var looks []look
	if fs.all {
		for uri, us := range t.byURI {
			if us.peer != nil {
				looks = append(looks, look{uri: uri, was: us.peer})
			}
		}
	} else {
		for uri := range fs.dirty {
			if us := t.byURI[uri]; us != nil && us.peer != nil {
				looks = append(looks, look{uri: uri, was: us.peer})
			}
		}
	}
	fs.all = false
	clear(fs.dirty)
	t.mu.Unlock()
	if len(looks) == 0 {
		return
	}
	for i := range looks {
		l := &looks[i]
		t.ix.lookups.Add(1)
		if l.now, l.local = t.cat.ResourceOwner(l.uri); !l.local {
			l.ep, _ = fs.locate(l.uri)
		}
	}
	var dead []gone
	var moved []string
	var ended []context.CancelCauseFunc
	// Both tables change under sdk, as in recheck.
	t.sdk.Lock()
	defer t.sdk.Unlock()
	t.mu.Lock()
	for _, l := range looks {
		us := t.byURI[l.uri]
		if us == nil || us.peer != l.was {
			continue // unsubscribed or moved meanwhile
		}
		_, refused := us.peer.refused[l.uri]
		switch {
		case l.local:
			t.unfileLocked(l.uri, us)
			t.fileLocked(l.uri, us, l.now, "")
			moved = append(moved, l.uri)
		case l.ep != "" && l.ep != us.peer.endpoint:
			t.unfileLocked(l.uri, us)
			t.fileLocked(l.uri, us, owner.Ref{}, l.ep)
			us.peer.moved[l.uri] = struct{}{}
		case l.ep != "" && !refused:
			// Where it was.
		default:
			g, end := t.dropLocked(l.uri, us)
			dead, ended = append(dead, g), append(ended, end...)
		}
	}
	t.mu.Unlock()
	t.tellDropped(dead, moved, ended)
}
