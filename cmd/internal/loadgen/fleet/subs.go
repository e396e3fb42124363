package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
)

// Resource updates across the fleet (invariant 11). A fixed resource's
// consumer publishes an update (Consumer.Updated) every publishEvery
// while held, and once more after its death was observed, which must
// fail with ErrDeadOwner. Subscribers open a session on a replica other
// than the one holding a resource of the pool, subscribe to it there (the
// replica follows it over a subscriptions/listen stream to the holder),
// and listen a while.
//
// What a subscriber hears cannot be traced to one publish: the server
// coalesces updates, tells subscribers once, without any publish, when
// the subscription moves, is dropped or its stream is reopened, and may
// tell one twice while a stream is replaced. So the subscriber's check
// asks only for a cause: some consumer of the URI that was not observed
// dead when it began published before the update was heard. An update
// whose only prior publishes came from consumers observed dead before
// they published (publishes that succeeded, which is itself a violation)
// is a violation; one with no prior publish at all may be a move's or a
// reopen's, and is inconclusive.

// publishEvery is how often a held fixed resource publishes.
const publishEvery = 5 * time.Millisecond

// uriPubs is what has been published on one URI, as clock readings taken
// before each Updated call: the first by a consumer not observed dead by
// then (whatever it returned: it may be what a subscriber hears before
// it returns), and the first that succeeded although its consumer had
// been observed dead before it began.
type uriPubs struct{ live, dead uint64 }

// subsBook records publishes and judges what subscribers hear.
type subsBook struct {
	t    *tally
	tick func() uint64

	mu   sync.Mutex
	pubs map[string]*uriPubs

	published, refused, lateRefused, heard, subscribed, subscribeFailed atomic.Int64
}

func newSubsBook(t *tally, tick func() uint64) *subsBook {
	return &subsBook{t: t, tick: tick, pubs: map[string]*uriPubs{}}
}

// publish publishes an update of rec's resource through k.
func (b *subsBook) publish(rec *record, k *catalog.Consumer) {
	begin := b.tick()
	if !rec.diedBefore(begin) {
		b.note(rec.name, begin, false)
	}
	b.judgePublish(rec, begin, k.Updated())
}

// latePublish publishes through k once more after rec's death was
// observed: a dead consumer's Updated must return ErrDeadOwner.
func (b *subsBook) latePublish(rec *record, k *catalog.Consumer) {
	if k == nil || rec.death.Load() == 0 {
		return // dropped, or abandoned with a crashed replica
	}
	b.judgePublish(rec, b.tick(), k.Updated())
}

// judgePublish judges one Updated call of rec's that began at clock
// reading begin and returned err.
func (b *subsBook) judgePublish(rec *record, begin uint64, err error) {
	dead := rec.diedBefore(begin)
	switch {
	case err == nil && dead:
		b.note(rec.name, begin, true)
	case err == nil:
		b.published.Add(1)
	case !errors.Is(err, catalog.ErrDeadOwner):
		b.t.Unexpected("Updated of %s (%s on %s): %v", rec.tag, rec.name, rec.rep.name, err)
	case dead:
		b.lateRefused.Add(1)
	default:
		b.refused.Add(1) // it died meanwhile
	}
	if !dead {
		return
	}
	b.t.Check(InvUpdateAfterDeath, 1)
	if err == nil {
		b.t.Violate(InvUpdateAfterDeath, "Updated of %s (%s on %s), begun at %d after its consumer was observed dead at %d, returned nil, not ErrDeadOwner",
			rec.tag, rec.name, rec.rep.name, begin, rec.death.Load())
	}
}

// note records a publish on uri begun at clock reading at.
func (b *subsBook) note(uri string, at uint64, dead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pubs[uri]
	if p == nil {
		p = &uriPubs{}
		b.pubs[uri] = p
	}
	f := &p.live
	if dead {
		f = &p.dead
	}
	if *f == 0 || at < *f {
		*f = at
	}
}

// heardUpdate judges an update of uri that a subscriber heard at clock
// reading at.
func (b *subsBook) heardUpdate(uri string, at uint64, via string) {
	b.heard.Add(1)
	b.mu.Lock()
	p := uriPubs{}
	if q := b.pubs[uri]; q != nil {
		p = *q
	}
	b.mu.Unlock()
	b.t.Check(InvUpdateAfterDeath, 1)
	switch {
	case p.live != 0 && p.live < at:
	case p.dead != 0 && p.dead < at:
		b.t.Violate(InvUpdateAfterDeath, "a subscriber on %s heard an update of %s at %d, whose only publishes before it came from consumers observed dead before they published (the first at %d)",
			via, uri, at, p.dead)
	default:
		b.t.unsure(InvUpdateAfterDeath) // a move, a drop or a reopen tells without a publish
	}
}

// subscriber subscribes, through a replica other than the holder, to
// fixed resources of the pool that a live consumer holds, and listens a
// while each time, until stop is closed.
func (w *world) subscriber(ctx context.Context, index int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(5000+index)))
	for {
		select {
		case <-stop:
			return
		default:
		}
		sn := w.pickSurf(rng, surfResource)
		holder := w.liveHolder(sn.ns)
		if holder == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		via := w.f.pickOther(rng, holder.rep)
		if via == nil || via == holder.rep {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		w.listen(ctx, via, sn.ns.name, time.Duration(100+rng.IntN(400))*time.Millisecond, stop)
	}
}

// liveHolder returns a consumer of ns that lives, has not begun to stop,
// and whose replica is up; nil if none.
func (w *world) liveHolder(ns *nameState) *record {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for _, rec := range ns.winners {
		if rec.alive() && !rec.stopping.Load() && !rec.rep.down.Load() {
			return rec
		}
	}
	return nil
}

// listen opens a session on via, subscribes it to uri, and listens for d.
func (w *world) listen(ctx context.Context, via *replica, uri string, d time.Duration, stop <-chan struct{}) {
	client := mcp.NewClient(&mcp.Implementation{Name: "livereg-loadgen-fleet-subscriber", Version: "dev"}, &mcp.ClientOptions{
		Logger: discard,
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			w.subs.heardUpdate(req.Params.URI, w.tick(), via.name)
		},
	})
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{
		Endpoint:   via.endpoint,
		HTTPClient: &http.Client{Transport: bearer.Transport{Next: via.tr, Token: tokenValid}},
	}, nil)
	if err != nil {
		w.subs.subscribeFailed.Add(1)
		if !via.down.Load() && ctx.Err() == nil {
			w.t.Unexpected("subscriber connect to %s: %v", via.name, err)
		}
		return
	}
	defer cs.Close()
	// Not found (its consumer died meanwhile) and peer_unavailable (its
	// holder crashed) are answers a correct fleet gives.
	if err := cs.Subscribe(cctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		w.subs.subscribeFailed.Add(1)
		return
	}
	w.subs.subscribed.Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}
