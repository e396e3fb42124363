package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
)

// adoptRetry is how often the adopter tries its routes when the fleet's
// view has not changed: a start can fail for a reason a change does not
// end (the cluster did not answer, say).
const adoptRetry = 2 * time.Second

// adopter keeps a fleet replica's demo routes served. Replicas started
// alike start the same demo consumers, and a name is one namespace
// fleet-wide: on all but one replica each such start is refused with
// catalog.ErrDuplicate. The adopter keeps each refused start and tries it
// again whenever the fleet's view changes and shows the name free, so that
// when its holder stops or crashes (its lease expires), some other replica
// serves the name again. It also watches the consumers it was given or
// started: one that dies before stop (its replica lost its etcd session,
// which kills every consumer holding a claim) is started again the same
// way.
//
// Its methods are safe for concurrent use. Its goroutines end at close,
// which must follow stop and the replica's Close: a start waiting for a
// session of a replica that has lost its etcd returns at that Close.
type adopter struct {
	rep    *etcdfleet.Replica
	log    *slog.Logger
	retry  time.Duration   // how often to try without a change; adoptRetry
	ctx    context.Context // ends at stop
	cancel context.CancelFunc
	kick   chan struct{}  // a start is pending again
	done   chan struct{}  // closed when run's loop has returned; nil before run
	wg     sync.WaitGroup // the watchers

	mu      sync.Mutex
	pending []adoption
	ks      []*catalog.Consumer // started by the adopter
}

// adoption is a start to try again; start may return a nil consumer that
// its caller owns (the fortune victim), which is then not watched.
type adoption struct {
	kind  catalog.Kind
	name  string
	start func() (*catalog.Consumer, error)
}

func newAdopter(rep *etcdfleet.Replica, log *slog.Logger) *adopter {
	ctx, cancel := context.WithCancel(context.Background())
	return &adopter{rep: rep, log: log, retry: adoptRetry, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1)}
}

// add keeps a start refused as a duplicate, to try again once run has
// begun.
func (a *adopter) add(p adoption) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending = append(a.pending, p)
}

// watch starts p again if k dies before stop.
func (a *adopter) watch(p adoption, k *catalog.Consumer) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		select {
		case <-k.Done():
		case <-a.ctx.Done():
			return
		}
		if a.ctx.Err() != nil {
			return
		}
		a.log.Warn("a demo route's consumer died; it starts again once its name is free", "kind", p.kind, "name", p.name)
		a.add(p)
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}()
}

// run logs the kept starts once and tries them in the background. It and
// close are called from one goroutine. A nil adopter does nothing.
func (a *adopter) run() {
	if a == nil {
		return
	}
	a.mu.Lock()
	names := make([]string, len(a.pending))
	for i, p := range a.pending {
		names[i] = p.name
	}
	a.mu.Unlock()
	if len(names) > 0 {
		a.log.Info("another replica serves these demo routes; this one takes each over when it is free", "routes", names)
	}
	a.done = make(chan struct{})
	go a.loop()
}

func (a *adopter) loop() {
	defer close(a.done)
	tick := time.NewTicker(a.retry)
	defer tick.Stop()
	woke := wokeStart
	for {
		// Taken before the tries: a change during them is not missed.
		changed := a.rep.View().Changes()
		a.tryAll(woke)
		select {
		case <-a.ctx.Done():
			return
		case <-a.kick:
			woke = wokeDeath
		case <-changed:
			woke = wokeChange
		case <-tick.C:
			woke = wokeRetry
		}
	}
}

// What set a round of tries off, as the takeover's log line says.
const (
	wokeStart  = "the start"
	wokeDeath  = "a consumer's death"
	wokeChange = "a change in the fleet"
	wokeRetry  = "the periodic retry"
)

// tryAll tries each kept start whose name the view shows free; woke says
// what set the round off.
func (a *adopter) tryAll(woke string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	left := a.pending[:0]
	for _, p := range a.pending {
		if a.ctx.Err() != nil || a.held(p) {
			left = append(left, p)
			continue
		}
		k, err := p.start()
		if err != nil {
			a.log.Debug("demo route not taken over yet", "kind", p.kind, "name", p.name, "err", err)
			left = append(left, p)
			continue
		}
		if k != nil {
			a.ks = append(a.ks, k)
			a.watch(p, k)
		}
		a.log.Info("took a demo route over", "kind", p.kind, "name", p.name, "after", woke)
	}
	clear(a.pending[len(left):])
	a.pending = left
}

// held reports whether the view shows p's name claimed. A template's key
// is the catalog's rewrite of it, not known here: it is always tried.
func (a *adopter) held(p adoption) bool {
	if p.kind == catalog.KindTemplate {
		return false
	}
	key, err := a.rep.Key(p.kind, p.name)
	if err != nil {
		return false
	}
	_, held := a.rep.View().Holder(key)
	return held
}

// stop ends the tries and the watching: a consumer that dies from now on,
// as the replica's Close kills them, stays dead. A nil adopter does
// nothing.
func (a *adopter) stop() {
	if a != nil {
		a.cancel()
	}
}

// close waits for the adopter's goroutines, once stop has been called and
// the replica closed, and returns the consumers it started, for its owner
// to stop. A nil adopter returns nil.
func (a *adopter) close() []*catalog.Consumer {
	if a == nil {
		return nil
	}
	a.cancel()
	if a.done != nil {
		<-a.done
	}
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ks
}
