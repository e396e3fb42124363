package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// Resource subscriptions across a fleet. A client of this replica that
// subscribes to a URI another replica serves (a fixed resource that
// Fleet.Peers locates there) is recorded in the table of subscriptions
// as any other, filed under the stream to that replica instead of an
// owner. Each peer gets one stream, whatever the number of URIs and
// subscribers: a 2026-07-28 subscriptions/listen POST to its fleet
// endpoint whose notifications.resourceSubscriptions are every URI this
// replica's clients follow there. Each notifications/resources/updated
// it carries goes through this replica's own update path, as a local
// consumer's update does, to every session subscribed here.
//
// When the set of URIs changes, a new stream is opened and the old one
// closed once the new one is acknowledged: an update heard on both is
// told twice, and none is lost. A stream that breaks is opened again,
// with backoff, while it has URIs to carry; once open again, its URIs'
// subscribers are told they were updated, for what the break may have
// hidden. A subscribe returns when a stream whose acknowledgement names
// its URI is open, or fails (CodePeerUnavailable, or the peer's error)
// within Fleet.ForwardTimeout and leaves nothing recorded.
//
// Where the URI is served is looked up again (recheckRemote) when the
// peer refuses it on a stream (it does not serve it), and a grace period
// after every change of the catalog's view (with a Remote, a consumer
// started or gone on any replica): a URI now served here becomes a local
// subscription, one served by another replica moves to that replica's
// stream, and one served nowhere is dropped as a local one whose owner
// died without a successor (subindex.go). Its subscribers are told once,
// as there. The holder, for its part, ends a stream whose URI it drops,
// so that this replica hears of the drop even while its view lags.
//
// Cost: one HTTP connection per peer with subscribed URIs (two while a
// stream is replaced), counted within Fleet.MaxConnsPerPeer of the
// Server's own client; two goroutines per such peer (the stream's reader
// and the one that opens and replaces it); on the peer, one listen
// stream (Options.MaxListenStreams) and one subscription per URI
// (Options.MaxSubscriptions, and no other cap: this replica applied its
// own to its clients). Each open or replacement sends every URI of the
// set once.

// maxPeerEvent bounds one event of a peer's subscription stream: an
// acknowledgement names every URI of the set, each at most the
// catalog's MaxURIBytes, so a big set needs a big event.
const maxPeerEvent = 4 << 20

// Backoff of a broken stream's reopening.
const (
	peerStreamBackoffMin = 50 * time.Millisecond
	peerStreamBackoffMax = 5 * time.Second
)

// Why a peer's stream failed or ended; each reaches a subscriber as
// CodePeerUnavailable.
var (
	// errEventTooLarge: an event of a peer's stream went past
	// maxPeerEvent.
	errEventTooLarge = errors.New("mcpserve: an event of the peer's subscription stream is too large")
	// errNotAcknowledged: the stream's first event was not the
	// acknowledgement of the URIs asked for.
	errNotAcknowledged = errors.New("mcpserve: the peer did not acknowledge the subscription")
	// errStreamReplaced ends a stream that another replaced.
	errStreamReplaced = errors.New("mcpserve: subscription stream replaced")
	// errSubscriptionDropped ends the stream of another replica that
	// followed a URI this replica no longer serves.
	errSubscriptionDropped = errors.New("mcpserve: a subscribed resource is served here no longer")
)

// fleetSubs holds the streams of a Server's subscriptions to URIs other
// replicas serve. Its maps are guarded by the table's mu (subscriptions);
// a nil *fleetSubs, a Server without Fleet, locates nothing.
type fleetSubs struct {
	t      *subscriptions
	peers  Peers
	hc     *http.Client // the forwarder's connections; no bound on a body
	sign   *hopSigner   // signs each stream's request
	meta   string
	begin  time.Duration
	self   endpointKey
	isSelf bool
	log    *slog.Logger
	ctx    context.Context // ends every stream at close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the streams' goroutines

	streams map[string]*peerStream // by endpoint
	dirty   map[string]struct{}    // remote URIs to look up again
	all     bool                   // look up every remote URI again
	closed  bool

	wake chan struct{} // capacity 1: rechecker looks up the remote URIs
}

func newFleetSubs(t *subscriptions, f *Fleet, fwd *forwarder, log *slog.Logger) *fleetSubs {
	ctx, cancel := context.WithCancel(context.Background())
	return &fleetSubs{
		t: t, peers: f.Peers, sign: fwd.sign, meta: fwd.meta, begin: fwd.begin,
		self: fwd.self, isSelf: fwd.isSelf, log: log, ctx: ctx, cancel: cancel,
		hc: &http.Client{
			Transport:     fwd.rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
		},
		streams: map[string]*peerStream{},
		dirty:   map[string]struct{}{},
		wake:    make(chan struct{}, 1),
	}
}

// peerStream is this replica's stream to one peer, and the URIs it
// carries. Its fields but kick are guarded by the table's mu.
type peerStream struct {
	endpoint string
	kick     chan struct{} // capacity 1: the set changed, or the stream ended

	uris    map[string]struct{} // filed here by the table
	pins    map[string]int      // subscribes that wait before the table records them
	refused map[string]struct{} // the peer does not serve them; left out until looked up again
	moved   map[string]struct{} // moved here from another holder: told once acknowledged
	seq     uint64              // grows with each change of the set

	// What the last attempt to open the stream gave.
	cur   *listenStream       // the open stream; nil when none
	acked map[string]struct{} // what cur's acknowledgement names, while it is open
	tried uint64              // the seq the last attempt that ended served
	err   error               // its failure, nil for none
	news  chan struct{}       // closed and replaced after each attempt
}

// locate returns the fleet endpoint of the replica, other than this one,
// that serves the fixed resource uri.
func (fs *fleetSubs) locate(uri string) (string, bool) {
	if fs == nil {
		return "", false
	}
	ep, ok := fs.peers.Peer(catalog.KindResource, uri)
	if !ok {
		return "", false
	}
	if k, err := parseEndpoint(ep); err != nil || fs.isSelf && k == fs.self {
		return "", false
	}
	return ep, true
}

// fileLocked adds uri to the set of the stream to ep, and returns the
// stream; it starts one for a peer that has none.
func (fs *fleetSubs) fileLocked(uri, ep string) *peerStream {
	ps := fs.streamLocked(ep)
	ps.uris[uri] = struct{}{}
	delete(ps.refused, uri)
	ps.changedLocked()
	return ps
}

// unfileLocked removes uri from ps's set.
func (fs *fleetSubs) unfileLocked(uri string, ps *peerStream) {
	delete(ps.uris, uri)
	delete(ps.refused, uri)
	delete(ps.moved, uri)
	ps.changedLocked()
}

func (fs *fleetSubs) streamLocked(ep string) *peerStream {
	if ps := fs.streams[ep]; ps != nil {
		return ps
	}
	ps := &peerStream{endpoint: ep, kick: make(chan struct{}, 1), uris: map[string]struct{}{},
		pins: map[string]int{}, refused: map[string]struct{}{}, moved: map[string]struct{}{}, news: make(chan struct{})}
	fs.streams[ep] = ps
	if !fs.closed {
		fs.wg.Add(1)
		go fs.run(ps)
	}
	return ps
}

func (ps *peerStream) changedLocked() {
	ps.seq++
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// wantLocked is the set the stream should carry, sorted.
func (ps *peerStream) wantLocked() []string {
	set := maps.Clone(ps.uris)
	for uri := range ps.pins {
		set[uri] = struct{}{}
	}
	for uri := range ps.refused {
		delete(set, uri)
	}
	return slices.Sorted(maps.Keys(set))
}

// prepare makes the stream to the replica that serves uri carry it before
// a resources/subscribe takes the table's sdk lock, so that the wait
// holds up no other subscribe; release undoes it once the table holds
// the subscription. First the replica judges cred's subscribe
// (fleetsubjudge.go): judged reports that it admitted it. For a URI
// served here, or nowhere, it does nothing.
func (fs *fleetSubs) prepare(ctx context.Context, uri string, ss *mcp.ServerSession, cred string) (release func(), judged bool, err error) {
	nothing := func() {}
	if fs == nil {
		return nothing, false, nil
	}
	if _, ok := fs.t.cat.ResourceOwner(uri); ok {
		return nothing, false, nil
	}
	ep, ok := fs.locate(uri)
	if !ok {
		return nothing, false, nil
	}
	t := fs.t
	t.mu.Lock()
	_, fromPeer := t.fleetStreams[ss]
	t.mu.Unlock()
	if fromPeer {
		return nothing, false, nil
	}
	if err := fs.judgeAt(ctx, ep, uri, cred); err != nil {
		return nil, false, err
	}
	t.mu.Lock()
	ps := fs.streamLocked(ep)
	ps.pins[uri]++
	ps.changedLocked()
	seq := ps.seq
	t.mu.Unlock()
	release = func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if ps.pins[uri]--; ps.pins[uri] <= 0 {
			delete(ps.pins, uri)
		}
		ps.changedLocked()
	}
	if err := fs.await(ctx, ps, uri, seq); err != nil {
		release()
		return nil, false, err
	}
	return release, true, nil
}

// await waits until ps's open stream carries uri, at most
// Fleet.ForwardTimeout; seq is ps's after uri joined its set. It returns
// the specification's resource-not-found error when the peer does not
// serve uri, the peer's JSON-RPC error, or CodePeerUnavailable.
func (fs *fleetSubs) await(ctx context.Context, ps *peerStream, uri string, seq uint64) error {
	t := fs.t
	timer := time.NewTimer(fs.begin)
	defer timer.Stop()
	for {
		t.mu.Lock()
		_, acked := ps.acked[uri]
		_, refused := ps.refused[uri]
		tried, err, news := ps.tried, ps.err, ps.news
		t.mu.Unlock()
		switch {
		case acked:
			return nil
		case refused:
			return mcp.ResourceNotFoundError(uri)
		case tried >= seq && err != nil:
			return fs.unavailable(uri, err)
		case tried >= seq:
			return fs.unavailable(uri, errNotAcknowledged)
		}
		select {
		case <-news:
		case <-timer.C:
			return fs.unavailable(uri, fmt.Errorf("%w (%v)", errNoAnswer, fs.begin))
		case <-ctx.Done():
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resource %s: request ended: %v", quote.Name(uri), context.Cause(ctx))}
		case <-fs.ctx.Done():
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resource %s: server closed", quote.Name(uri))}
		}
	}
}

// unavailable is the error of a subscribe whose peer's stream failed:
// the peer's own JSON-RPC error as it sent it, or CodePeerUnavailable,
// retryable since a subscription runs no body.
func (fs *fleetSubs) unavailable(uri string, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc
	}
	fs.log.Warn("mcpserve: subscribing at the replica that serves the resource failed", "uri", quote.Name(uri), "err", err)
	return &jsonrpc.Error{Code: CodePeerUnavailable,
		Message: fmt.Sprintf("resource %s: the replica that serves it cannot be reached", quote.Name(uri)),
		Data:    marshalData(map[string]any{"reason": "peer_unavailable", "retryable": true})}
}

// run keeps ps's stream open while its set is not empty, replacing it
// when the set changes: one goroutine per peer with subscribed URIs.
func (fs *fleetSubs) run(ps *peerStream) {
	defer fs.wg.Done()
	t := fs.t
	var backoff time.Duration
	lost := false // a stream broke: tell its URIs' subscribers once it is back
	for {
		t.mu.Lock()
		if fs.closed || len(ps.uris) == 0 && len(ps.pins) == 0 {
			if fs.streams[ps.endpoint] == ps {
				delete(fs.streams, ps.endpoint)
			}
			cur := ps.cur
			ps.cur, ps.acked = nil, nil
			t.mu.Unlock()
			if cur != nil {
				cur.close(errStreamReplaced)
			}
			return
		}
		want, seq, cur := ps.wantLocked(), ps.seq, ps.cur
		t.mu.Unlock()
		if cur != nil && cur.ended() {
			lost, cur = true, nil
		}
		var retry *time.Timer
		if len(want) > 0 && (cur == nil || !slices.Equal(cur.uris, want)) {
			next, err := fs.open(ps, want)
			var ref *peerRefusal
			var old *listenStream
			var told []string
			t.mu.Lock()
			switch {
			case err == nil:
				old, ps.cur, ps.acked = ps.cur, next, next.agreed
				ps.tried, ps.err = seq, nil
				for uri := range ps.moved {
					if _, ok := next.agreed[uri]; ok {
						told = append(told, uri)
						delete(ps.moved, uri)
					}
				}
			case errors.As(err, &ref):
				// Left out, and looked up again; the rest is tried at once.
				ps.refused[ref.uri] = struct{}{}
				ps.changedLocked()
				fs.dirty[ref.uri] = struct{}{}
				fs.wakeRecheck()
			default:
				ps.tried, ps.err = seq, err
			}
			close(ps.news)
			ps.news = make(chan struct{})
			t.mu.Unlock()
			switch {
			case err == nil:
				if old != nil {
					old.close(errStreamReplaced)
				}
				if lost {
					told = next.uris
				}
				for _, uri := range told {
					t.relay(ps, uri)
				}
				backoff, lost, cur = 0, false, next
			case ref != nil:
				continue
			default:
				backoff = min(max(2*backoff, peerStreamBackoffMin), peerStreamBackoffMax)
				fs.log.Debug("mcpserve: opening a subscription stream to a peer failed", "peer", quote.Name(ps.endpoint), "err", err, "retry", backoff)
				retry = time.NewTimer(backoff)
			}
		} else if len(want) == 0 && cur != nil {
			// Every URI was refused: nothing to carry until they are
			// looked up again.
			t.mu.Lock()
			ps.cur, ps.acked = nil, nil
			t.mu.Unlock()
			cur.close(errStreamReplaced)
			cur = nil
		}
		var ended <-chan struct{}
		if cur != nil {
			ended = cur.done
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-ps.kick:
		case <-ended:
		case <-retryC:
		case <-fs.ctx.Done():
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// wakeRecheck asks rechecker to look up the dirty URIs.
func (fs *fleetSubs) wakeRecheck() {
	select {
	case fs.wake <- struct{}{}:
	default:
	}
}

// viewChanged asks for every remote URI to be looked up again, grace
// from now: changes within it are looked up once.
func (fs *fleetSubs) viewChanged(grace time.Duration) {
	t := fs.t
	t.mu.Lock()
	first := !fs.all
	fs.all = true
	t.mu.Unlock()
	if first {
		time.AfterFunc(grace, fs.wakeRecheck)
	}
}

// close ends every stream and waits for their goroutines. Idempotent;
// nil-safe.
func (fs *fleetSubs) close() {
	if fs == nil {
		return
	}
	fs.t.mu.Lock()
	fs.closed = true
	fs.t.mu.Unlock()
	fs.cancel()
	fs.wg.Wait()
}

// relay queues an update of uri read from ps's stream, as published does
// a local one, if uri is still filed under ps: a stream replaced, or one
// whose URI was dropped or moved, delivers nothing more.
func (t *subscriptions) relay(ps *peerStream, uri string) {
	t.mu.Lock()
	us := t.byURI[uri]
	held := us != nil && us.peer == ps
	if held {
		t.pending[uri] = struct{}{}
	}
	t.mu.Unlock()
	if held {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// trackPeerStream records, for the table, a subscriptions/listen that
// another replica opened here, with the cancel that ends it; the
// returned func forgets it.
func (t *subscriptions) trackPeerStream(ss *mcp.ServerSession, end context.CancelCauseFunc) func() {
	t.mu.Lock()
	t.fleetStreams[ss] = end
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.fleetStreams, ss)
		t.mu.Unlock()
	}
}
