package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/owner"
)

// Defaults of the subscription caps.
const (
	// defaultMaxSubscriptionsPerSession caps one session's resource
	// subscriptions: far above what a client following the resources it
	// shows needs, far below the 30,000 one anonymous session made in a
	// probe (63 MB).
	defaultMaxSubscriptionsPerSession = 256
	// defaultMaxSubscriptions caps the subscriptions of all sessions: at
	// the 2 KB each that probe measured, about 32 MB.
	defaultMaxSubscriptions = 16384
)

// errTooManySubscriptions: a resources/subscribe to a new URI arrived
// while its session held Options.MaxSubscriptionsPerSession subscriptions,
// all sessions together Options.MaxSubscriptions, or its client its share
// of them (then it wraps errOverShare too). The client gets JSON-RPC error
// CodeOverloaded with data {"reason":"too_many_subscriptions",
// "limit":N,"retryable":false}; nothing changes.
var errTooManySubscriptions = errors.New("mcpserve: subscription limit reached")

// testHookRecheck, if set, runs for each URI the re-check looks up, with
// no lock held: a test parks it to show that nothing waits for it.
var testHookRecheck func(uri string)

// testHookRecheckDropped, if set, runs once the re-check has dropped the
// URIs nobody serves from this server's table, before it tells their
// subscribers and drops them from the SDK's.
var testHookRecheckDropped func()

// subIndex is what bounds the table of subscriptions and keeps its
// re-check cheap; its fields are guarded by subscriptions.mu.
//
// The re-check after a change used to look up every subscribed URI on the
// notifier's goroutine, under the lock subscribes take: 40 URIs of 200 KB
// held every list_changed 18.8 s. Now each URI is indexed under the owner
// of the route that serves it, each such owner has an AfterDeath, and a
// death re-checks the URIs of that owner alone, on the table's own
// goroutine, with no lock held during the lookups. A route that changes
// hands always does so through its old owner's death (a stop, a cancel, a
// restart), so nothing else needs a look.
type subIndex struct {
	grace      time.Duration // how long after a death its URIs are looked up
	perSession int64         // <= 0: no cap
	max        int64         // <= 0: no cap
	shares     *shares
	refused    *refusals
	clientOf   func(mcp.Request) client

	total   int64                             // subscriptions held: (session, URI) pairs
	opened  uint64                            // subscriptions admitted since New
	clients map[*mcp.ServerSession]client     // whose share a session's subscriptions count in
	byOwner map[owner.Ref]map[string]struct{} // subscribed URIs by the owner serving them
	watched map[owner.Ref]struct{}            // owners with an AfterDeath of the table's
	dirty   map[owner.Ref]struct{}            // dead owners whose URIs await the re-check
	wake    chan struct{}                     // capacity 1: "re-check the dirty owners"

	// lookups counts the URIs the re-check looked up, for tests and
	// benchmarks of its cost.
	lookups atomic.Uint64
}

// limit sets the caps of the table from opts, and the grace of a death.
func (t *subscriptions) limit(opts Options, clientShare, anonShare float64, auth bool, rc *refusalCounts, clientOf func(mcp.Request) client) {
	ix := &t.ix
	ix.grace, _ = notifyWindow(opts.NotifyWindow)
	ix.perSession = int64(cmpOr(opts.MaxSubscriptionsPerSession, defaultMaxSubscriptionsPerSession))
	max := cmpOr(opts.MaxSubscriptions, defaultMaxSubscriptions)
	ix.max = int64(max)
	ix.shares = newShares(max, clientShare, anonShare, auth)
	ix.refused = &rc.subs
	ix.clientOf = clientOf
}

func (ix *subIndex) init() {
	ix.clients = map[*mcp.ServerSession]client{}
	ix.byOwner = map[owner.Ref]map[string]struct{}{}
	ix.watched = map[owner.Ref]struct{}{}
	ix.dirty = map[owner.Ref]struct{}{}
	ix.wake = make(chan struct{}, 1)
}

// admitLocked counts one more subscription of ss, which holds held, or
// refuses it with the JSON-RPC error to answer. Call with t.mu held.
func (t *subscriptions) admitLocked(req *mcp.SubscribeRequest, held int) error {
	ix := &t.ix
	ss := req.Session
	cl, known := ix.clients[ss]
	if !known && ix.clientOf != nil {
		cl = ix.clientOf(req)
	}
	// Another replica's stream carries every URI its clients follow
	// here, each within that replica's own caps: it counts against
	// MaxSubscriptions alone.
	_, fromPeer := t.fleetStreams[ss]
	if fromPeer {
		cl = client{}
	}
	var reason string
	var limit int64
	switch {
	case !fromPeer && ix.perSession > 0 && int64(held) >= ix.perSession:
		reason, limit = reasonSession, ix.perSession
	case !ix.shares.take(cl):
		reason, limit = reasonShare, ix.shares.perClient
	case ix.max > 0 && ix.total >= ix.max:
		ix.shares.give(cl)
		reason, limit = reasonCap, ix.max
	}
	if reason != "" {
		ix.refused.refused(t.log, reason, limit)
		err := fmt.Errorf("%w (%d subscriptions)", errTooManySubscriptions, limit)
		if reason == reasonShare {
			err = fmt.Errorf("%w: %w (%d subscriptions)", errTooManySubscriptions, errOverShare, limit)
		}
		data, _ := json.Marshal(map[string]any{"reason": "too_many_subscriptions", "limit": limit, "retryable": false})
		return &jsonrpc.Error{Code: CodeOverloaded, Message: err.Error() + "; unsubscribe from another resource first", Data: data}
	}
	ix.clients[ss] = cl
	ix.total++
	ix.opened++
	return nil
}

// releaseLocked gives back one subscription of ss.
func (t *subscriptions) releaseLocked(ss *mcp.ServerSession) {
	t.ix.total--
	t.ix.shares.give(t.ix.clients[ss])
}

// indexLocked files uri under o, and arranges for o's death to re-check
// it.
func (t *subscriptions) indexLocked(uri string, o owner.Ref) {
	ix := &t.ix
	uris := ix.byOwner[o]
	if uris == nil {
		uris = map[string]struct{}{}
		ix.byOwner[o] = uris
	}
	uris[uri] = struct{}{}
	if _, ok := ix.watched[o]; !ok {
		ix.watched[o] = struct{}{}
		o.AfterDeath(func() { t.ownerDied(o) })
	}
}

// unindexLocked removes uri from under o.
func (t *subscriptions) unindexLocked(uri string, o owner.Ref) {
	if uris := t.ix.byOwner[o]; uris != nil {
		delete(uris, uri)
		if len(uris) == 0 {
			delete(t.ix.byOwner, o)
		}
	}
}

// ownerDied queues o's URIs for the re-check and wakes rechecker one grace
// period (the notify window) later: a restart that takes a URI over right
// after the death, as a supervisor's does, then keeps its subscribers.
func (t *subscriptions) ownerDied(o owner.Ref) {
	t.mu.Lock()
	delete(t.ix.watched, o)
	_, has := t.ix.byOwner[o]
	if has {
		t.ix.dirty[o] = struct{}{}
	}
	t.mu.Unlock()
	if has {
		time.AfterFunc(t.ix.grace, func() {
			select {
			case t.ix.wake <- struct{}{}:
			default:
			}
		})
	}
}

// rechecker runs recheck each time an owner's death asks, until close: a
// goroutine of its own, so that a re-check holds up neither the
// notifier's list_changed nor run's updates.
//
// In a fleet it also re-resolves the URIs other replicas serve
// (recheckRemote): those a peer refused, at once, and all of them one
// grace period after each change of the catalog's view, which a Remote's
// change (a consumer started or gone on any replica) is.
func (t *subscriptions) rechecker() {
	var changes <-chan struct{}
	var remote <-chan struct{}
	if t.fleet != nil {
		changes, remote = t.cat.Changes(), t.fleet.wake
	}
	for {
		select {
		case <-t.ix.wake:
			t.recheck()
		case <-changes:
			changes = t.cat.Changes()
			t.fleet.viewChanged(t.ix.grace)
		case <-remote:
			t.recheckRemote()
		case <-t.stop:
			return
		}
	}
}

// recheck runs on rechecker's goroutine: the subscribers of a URI whose owner
// died get notifications/resources/updated, once; if nobody serves the
// URI any more they are then dropped, here and from the SDK's table, and
// if a successor serves it they stay. It costs one lookup per URI of the
// owners that died, made with no lock held.
func (t *subscriptions) recheck() {
	type look struct {
		uri      string
		was, now owner.Ref
		ok       bool
		ep       string // the replica that serves it, when none here does
	}
	t.mu.Lock()
	var looks []look
	for o := range t.ix.dirty {
		for uri := range t.ix.byOwner[o] {
			looks = append(looks, look{uri: uri, was: o})
		}
	}
	clear(t.ix.dirty)
	t.mu.Unlock()
	if len(looks) == 0 {
		return
	}
	for i := range looks {
		if h := testHookRecheck; h != nil {
			h(looks[i].uri)
		}
		t.ix.lookups.Add(1)
		looks[i].now, looks[i].ok = t.cat.ResourceOwner(looks[i].uri)
		if !looks[i].ok {
			looks[i].ep, _ = t.fleet.locate(looks[i].uri)
		}
	}
	var dead []gone
	var moved []string
	var ended []context.CancelCauseFunc
	// The SDK's table changes too, from the moment a URI leaves this one
	// until its subscribers are told and forgotten there: held all along,
	// so that no subscribe, and no successor's update, lands between the
	// two tables' changes (a new subscriber is recorded after the old ones
	// are forgotten, and an update finds only it). Order: sdk, then mu.
	t.sdk.Lock()
	defer t.sdk.Unlock()
	t.mu.Lock()
	for _, l := range looks {
		us := t.byURI[l.uri]
		if us == nil || us.peer != nil || !us.owner.Same(l.was) {
			continue // unsubscribed meanwhile, or a subscribe found the successor
		}
		if !l.ok && l.ep != "" {
			// Another replica serves it now: the subscription follows,
			// but not another replica's stream, which crosses one hop
			// at most; that one ends, and its replica re-resolves.
			if g, end := t.dropStreamsLocked(l.uri, us); len(end) > 0 {
				dead, ended = append(dead, g), append(ended, end...)
			}
			if t.byURI[l.uri] != nil {
				// Told once the new holder's stream acknowledged it
				// (fleetsubs.go).
				t.unfileLocked(l.uri, us)
				t.fileLocked(l.uri, us, owner.Ref{}, l.ep)
				us.peer.moved[l.uri] = struct{}{}
			}
			continue
		}
		if !l.ok {
			g, end := t.dropLocked(l.uri, us)
			dead, ended = append(dead, g), append(ended, end...)
			continue
		}
		if l.now.Same(l.was) {
			continue // not dead after all: nothing changed
		}
		t.unindexLocked(l.uri, l.was)
		us.owner = l.now
		t.indexLocked(l.uri, l.now)
		moved = append(moved, l.uri)
	}
	t.mu.Unlock()
	t.tellDropped(dead, moved, ended)
}

// gone is a URI dropped from some of its sessions, or all.
type gone struct {
	uri      string
	sessions []*mcp.ServerSession
}

// dropLocked drops uri and all its subscribers from this table, and
// returns them, with the cancels of the streams other replicas opened
// here that followed it: such a stream ends, so that its replica hears
// of the drop (it re-resolves the URI when it opens the stream again).
func (t *subscriptions) dropLocked(uri string, us *uriSubs) (gone, []context.CancelCauseFunc) {
	g := gone{uri: uri}
	var ended []context.CancelCauseFunc
	for ss := range us.sessions {
		g.sessions = append(g.sessions, ss)
		delete(t.bySession[ss], uri)
		t.releaseLocked(ss)
		if end := t.fleetStreams[ss]; end != nil {
			ended = append(ended, end)
		}
	}
	delete(t.byURI, uri)
	t.unfileLocked(uri, us)
	return g, ended
}

// dropStreamsLocked drops the streams of other replicas from following
// uri, as dropLocked does; the rest of its subscribers stay.
func (t *subscriptions) dropStreamsLocked(uri string, us *uriSubs) (gone, []context.CancelCauseFunc) {
	g := gone{uri: uri}
	var ended []context.CancelCauseFunc
	for ss := range us.sessions {
		if end := t.fleetStreams[ss]; end != nil {
			g.sessions = append(g.sessions, ss)
			ended = append(ended, end)
		}
	}
	for _, ss := range g.sessions {
		t.forgetLocked(ss, uri)
	}
	return g, ended
}

// tellDropped tells the subscribers of the URIs that moved, and those
// dropped, that they were updated, forgets the dropped in the SDK's
// table, and ends the streams of other replicas that followed them. Call
// with t.sdk held and t.mu not.
func (t *subscriptions) tellDropped(dead []gone, moved []string, ended []context.CancelCauseFunc) {
	if h := testHookRecheckDropped; h != nil && len(dead) > 0 {
		h()
	}
	for _, uri := range moved {
		// Through run, which judges the grants by the successor's plan
		// first (subjudge.go): the successor's may refuse some.
		t.queue(uri)
	}
	for _, g := range dead {
		if len(g.sessions) == 0 {
			continue
		}
		t.send(g.uri)
		for _, ss := range g.sessions {
			t.sdkForget(ss, g.uri)
		}
	}
	for _, end := range ended {
		end(errSubscriptionDropped)
	}
}
