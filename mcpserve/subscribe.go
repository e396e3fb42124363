package mcpserve

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
)

// The subscription methods; the SDK answers them, through the handlers
// below, and the middleware checks what a resources/subscribe left.
const (
	methodSubscribe   = "resources/subscribe"
	methodUnsubscribe = "resources/unsubscribe"
)

// subscriptions is the server's table of resource subscriptions: which
// sessions follow which URI, and whose route served the URI when they
// subscribed. The SDK keeps a table of its own, which decides who
// Server.ResourceUpdated reaches; this one decides what the SDK's may
// hold, and removes from it what the SDK would keep: a URI whose last
// subscriber left, a session that ended, a URI nobody serves any more.
//
// Concurrency: mu guards the maps; sdk serialises the changes to the SDK's
// table that this table makes, with the subscribes that could race them
// (see subscribeChecked). Order: sdk, then mu. Updates published by
// consumers are queued and sent by one goroutine, run, which close stops.
type subscriptions struct {
	cat  *catalog.Catalog
	log  *slog.Logger
	srv  *mcp.Server
	next mcp.MethodHandler // the SDK's own handling, beneath the middleware

	sdk       sync.Mutex
	mu        sync.Mutex
	byURI     map[string]*uriSubs
	bySession map[*mcp.ServerSession]map[string]struct{}
	pending   map[string]struct{} // updates published, not sent yet
	ix        subIndex            // caps and the index by owner (subindex.go)
	// fleet holds the streams to the peers that serve subscribed URIs
	// this replica does not (fleetsubs.go); nil without Options.Fleet.
	fleet *fleetSubs
	// fleetStreams are the subscriptions/listen streams other replicas
	// opened here, each with the cancel that ends it (fleetsubs.go).
	fleetStreams map[*mcp.ServerSession]context.CancelCauseFunc

	kick         chan struct{}
	stop, done   chan struct{}
	stopOnce     sync.Once
	stopUpdating func()

	// credOf gives the credential a resources/subscribe presents, and
	// readError maps a refused judgment as resources/read maps its own
	// (subjudge.go); now is the clock expiries are read on.
	credOf    func(ctx context.Context, req mcp.Request) (context.Context, string)
	readError func(ctx context.Context, uri string, err error) error
	now       func() time.Time // read under mu
	rejudged  atomic.Uint64    // grants judged again since New

	// recorded, a test hook (nil in production), runs at the end of
	// subscribe, once the subscription is in this table and before the
	// SDK records it in its own.
	recorded func(ss *mcp.ServerSession, uri string)
}

type uriSubs struct {
	owner    owner.Ref   // the owner of the route that served the URI last we looked
	peer     *peerStream // the stream of the replica that serves it; nil when served here
	sessions map[*mcp.ServerSession]grant
	// gen is the catalog's resource version the grants were last
	// confirmed at, soonest the earliest expiry among them (zero for
	// none): an update re-judges only when either has passed
	// (subjudge.go).
	gen     uint64
	soonest time.Time
}

// internalKey marks the unsubscribes the table makes itself, so that the
// handler the SDK calls for them leaves the table alone.
type internalKey struct{}

func newSubscriptions(cat *catalog.Catalog, log *slog.Logger) *subscriptions {
	t := &subscriptions{
		cat: cat, log: log, now: time.Now,
		byURI:        make(map[string]*uriSubs),
		bySession:    make(map[*mcp.ServerSession]map[string]struct{}),
		pending:      make(map[string]struct{}),
		fleetStreams: make(map[*mcp.ServerSession]context.CancelCauseFunc),
		kick:         make(chan struct{}, 1),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	t.ix.init()
	return t
}

// start begins sending published updates through srv. The middleware has
// set next by then.
func (t *subscriptions) start(srv *mcp.Server) {
	t.srv = srv
	t.stopUpdating = t.cat.OnResourceUpdated(t.published)
	go t.run()
	go t.rechecker()
}

// close stops run and the catalog's calls into the table. Idempotent.
func (t *subscriptions) close() {
	t.stopOnce.Do(func() {
		if t.stopUpdating != nil {
			t.stopUpdating()
		}
		close(t.stop)
	})
	if t.stopUpdating != nil {
		<-t.done
	}
	t.fleet.close()
}

// subscribe is the SDK's SubscribeHandler: a URI that no live route
// serves (a fixed resource or a template that matches it) is refused
// with the specification's resource-not-found error, a caller the
// route's plan refuses with the error its resources/read would get
// (subjudge.go), and a new URI beyond
// the caps (subindex.go) with CodeOverloaded; then nothing is recorded.
// In a fleet, a URI served by another replica is followed there, over
// that replica's stream (fleetsubs.go): subscribe returns once the
// stream carries it, or fails with CodePeerUnavailable and records
// nothing. A stream another replica opened here is never followed
// elsewhere: a subscription crosses one hop at most.
func (t *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	t.mu.Lock()
	_, fromPeer := t.fleetStreams[req.Session]
	t.mu.Unlock()
	v := t.version()
	g, err := t.judge(ctx, req, fromPeer)
	o := g.by
	var ep string
	if err != nil {
		if !errors.Is(err, catalog.ErrNotFound) {
			return err
		}
		var ok bool
		if fromPeer {
			return mcp.ResourceNotFoundError(uri)
		}
		if ep, ok = t.fleet.locate(uri); !ok {
			return mcp.ResourceNotFoundError(uri)
		}
		// Judged by the plan of the replica that serves it
		// (fleetsubjudge.go), unless prepare did, before the sdk lock.
		ctx, cred := t.credential(ctx, req)
		if judged, _ := ctx.Value(judgedAtKey{}).(string); judged != uri {
			if err := t.fleet.judgeAt(ctx, ep, uri, cred); err != nil {
				return err
			}
		}
		g = t.remoteGrant(ctx, cred)
	}
	t.mu.Lock()
	uris := t.bySession[req.Session]
	_, had := uris[uri]
	if !had {
		if err := t.admitLocked(req, len(uris)); err != nil {
			t.mu.Unlock()
			return err
		}
	}
	us := t.byURI[uri]
	switch {
	case us == nil:
		us = &uriSubs{sessions: make(map[*mcp.ServerSession]grant), gen: v}
		t.byURI[uri] = us
		t.fileLocked(uri, us, o, ep)
	case ep == "" && (us.peer != nil || !us.owner.Same(o)),
		ep != "" && (us.peer == nil || us.peer.endpoint != ep):
		// A successor serves it now, here or on another replica: file it
		// under the owner whose death matters, or the stream that
		// carries it.
		t.unfileLocked(uri, us)
		t.fileLocked(uri, us, o, ep)
	}
	us.grantLocked(req.Session, g)
	if uris == nil {
		uris = make(map[string]struct{})
		t.bySession[req.Session] = uris
		go t.watch(req.Session)
	}
	uris[uri] = struct{}{}
	ps, seq := us.peer, uint64(0)
	if ps != nil {
		seq = ps.seq
	}
	t.mu.Unlock()
	if ps != nil {
		if err := t.fleet.await(ctx, ps, uri, seq); err != nil {
			if !had {
				t.mu.Lock()
				t.forgetLocked(req.Session, uri)
				t.mu.Unlock()
			}
			return err
		}
	}
	if t.recorded != nil {
		t.recorded(req.Session, uri)
	}
	return nil
}

// fileLocked files us, newly subscribed or moved, under the owner o that
// serves uri here, or with ep set, under the stream to the replica at ep.
func (t *subscriptions) fileLocked(uri string, us *uriSubs, o owner.Ref, ep string) {
	if ep != "" {
		us.owner = owner.Ref{}
		us.peer = t.fleet.fileLocked(uri, ep)
		return
	}
	us.owner, us.peer = o, nil
	t.indexLocked(uri, o)
}

// unfileLocked undoes fileLocked.
func (t *subscriptions) unfileLocked(uri string, us *uriSubs) {
	if us.peer != nil {
		t.fleet.unfileLocked(uri, us.peer)
		us.peer = nil
		return
	}
	t.unindexLocked(uri, us.owner)
}

// unsubscribe is the SDK's UnsubscribeHandler. Unsubscribing from a URI
// not subscribed to succeeds, as the SDK's own table has it.
func (t *subscriptions) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if ctx.Value(internalKey{}) != nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(req.Session, req.Params.URI)
	return nil
}

func (t *subscriptions) forgetLocked(ss *mcp.ServerSession, uri string) {
	if us := t.byURI[uri]; us != nil {
		if _, held := us.sessions[ss]; held {
			delete(us.sessions, ss)
			t.releaseLocked(ss)
		}
		if len(us.sessions) == 0 {
			delete(t.byURI, uri)
			t.unfileLocked(uri, us)
		}
	}
	if uris := t.bySession[ss]; uris != nil {
		delete(uris, uri)
		// The session's map stays while the session lives: its watcher
		// removes it when the session ends.
	}
}

// subscribeChecked answers a resources/subscribe through the SDK, which
// calls subscribe and then records the session in its own table. A
// death, or the session's end, can drop the subscription from this table
// in between; then the SDK's entry is removed too and the client is told
// the resource is not found, since it would never hear of it.
func (t *subscriptions) subscribeChecked(ctx context.Context, method string, req *mcp.SubscribeRequest) (mcp.Result, error) {
	if req.Params != nil {
		// A URI another replica serves: its stream is made to carry it
		// first, so that the wait holds up no other subscribe.
		pctx, cred := t.credential(ctx, req)
		release, judged, err := t.fleet.prepare(pctx, req.Params.URI, req.Session, cred)
		if err != nil {
			return nil, err
		}
		defer release()
		if judged {
			ctx = context.WithValue(ctx, judgedAtKey{}, req.Params.URI)
		}
	}
	t.sdk.Lock()
	defer t.sdk.Unlock()
	res, err := t.next(ctx, method, req)
	if err != nil || req.Params == nil {
		return res, err
	}
	t.mu.Lock()
	_, held := t.bySession[req.Session][req.Params.URI]
	t.mu.Unlock()
	if !held {
		t.sdkForget(req.Session, req.Params.URI)
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return res, nil
}

// sdkForget removes (ss, uri) from the SDK's table, and uri itself once
// nobody there follows it. Call with t.sdk held and t.mu not.
func (t *subscriptions) sdkForget(ss *mcp.ServerSession, uri string) {
	ctx := context.WithValue(context.Background(), internalKey{}, true)
	if _, err := t.next(ctx, methodUnsubscribe, &mcp.UnsubscribeRequest{Session: ss, Params: &mcp.UnsubscribeParams{URI: uri}}); err != nil {
		t.log.Warn("mcpserve: dropping a subscription from the SDK's table failed", "err", err)
	}
}

// watch drops a session's subscriptions once it ends: one goroutine per
// session that subscribed, for as long as the session lives.
func (t *subscriptions) watch(ss *mcp.ServerSession) {
	_ = ss.Wait()
	t.sdk.Lock()
	defer t.sdk.Unlock()
	t.mu.Lock()
	uris := t.bySession[ss]
	delete(t.bySession, ss)
	for uri := range uris {
		t.forgetLocked(ss, uri)
	}
	delete(t.ix.clients, ss)
	t.mu.Unlock()
	for uri := range uris {
		t.sdkForget(ss, uri)
	}
}

// published is the catalog's listener: it queues uri if anybody follows
// it, and returns at once.
func (t *subscriptions) published(uri string) { t.queue(uri) }

// queue has run deliver an update of uri, if anybody follows it.
func (t *subscriptions) queue(uri string) {
	t.mu.Lock()
	_, followed := t.byURI[uri]
	if followed {
		t.pending[uri] = struct{}{}
	}
	t.mu.Unlock()
	if followed {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// run sends queued updates until close. Updates of one URI published while
// it waits go out as one.
func (t *subscriptions) run() {
	defer close(t.done)
	for {
		select {
		case <-t.kick:
		case <-t.stop:
			return
		}
		t.mu.Lock()
		uris := t.pending
		t.pending = make(map[string]struct{})
		t.mu.Unlock()
		for uri := range uris {
			t.deliver(uri)
		}
	}
}

func (t *subscriptions) send(uri string) {
	_ = t.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// size returns the URIs and sessions the table holds, for tests.
func (t *subscriptions) size() (uris, sessions int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byURI), len(t.bySession)
}
