package catalog

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/internal/spread"
	"github.com/livereg/livereg/owner"
)

// CallCounts counts calls (tools/call and resources/read) by how they
// ended, since the catalog was made.
type CallCounts struct {
	OK           uint64 // the body returned without error
	HandlerError uint64 // the body returned an error
	Panicked     uint64 // the body unwound: it panicked or called runtime.Goexit (ErrRoutePanicked)
	Denied       uint64 // the route's plan refused the caller (see Denied)
	Gone         uint64 // ErrRouteGone: the owner died or stopped first
	Overloaded   uint64 // ErrOverloaded
	Unknown      uint64 // ErrNotFound
	Invalid      uint64 // ErrInvalidArguments, ErrInvalidResult
	Canceled     uint64 // the caller's context ended first
}

// DeathCounts counts the deaths of started consumers by path, since the
// catalog was made.
type DeathCounts struct {
	Stop, Cancel, Panic, Drop uint64
}

type outcome uint8

const (
	outOK outcome = iota
	outHandlerError
	outPanicked
	outDenied
	outGone
	outOverloaded
	outUnknown
	outInvalid
	outCanceled
	numOutcomes
)

// callStripes spreads the call counters, as the gate spreads its counts:
// every call writes one, and one shared line would undo dispatch's scaling.
const callStripes = 16

type callStripe struct {
	n [numOutcomes]atomic.Uint64
	_ [128 - 8*numOutcomes]byte
}

// counters is what Stats reports beyond the registries' own state.
type counters struct {
	// calls is an allocation of its own (2 KiB, a size class whose
	// objects sit on 2 KiB boundaries), so that no stripe shares a cache
	// line with the catalog's fields that every call reads.
	calls                   *[callStripes]callStripe
	deaths                  [4]atomic.Uint64 // stop, cancel, panic, drop
	duplicates, capRefusals atomic.Uint64
}

// countCall counts one call by its error: an admitted call from finish,
// once a panicking body's error is set, and a refused one from refused. One
// atomic add on a line of the calling stack's own, nothing more on success.
func (c *Catalog) countCall(ctx context.Context, err error) {
	o := outOK
	if err != nil {
		o = classify(ctx, err)
	}
	c.counts.calls[spread.Hash()%callStripes].n[o].Add(1)
}

// refused counts a call that never reached its body and returns its error.
func (c *Catalog) refused(ctx context.Context, err error) error {
	c.countCall(ctx, err)
	return err
}

func classify(ctx context.Context, err error) outcome {
	switch {
	case errors.Is(err, ErrRoutePanicked):
		return outPanicked
	case errors.Is(err, ErrRouteGone):
		return outGone
	case errors.Is(err, ErrOverloaded):
		return outOverloaded
	case errors.Is(err, ErrNotFound):
		return outUnknown
	case errors.Is(err, ErrInvalidArguments), errors.Is(err, ErrInvalidResult):
		return outInvalid
	case Denied(err) || errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		return outDenied
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return outCanceled
	}
	return outHandlerError
}

// countDeath counts a started consumer's death, once, by its path; logs a
// panic that killed it at Error, with the value and the stack the recovery
// kept; and warns of a drop: a consumer whose token was lost without Stop
// is almost always its caller's bug. It runs on the reclaim's goroutine or
// at the end of a start, never on a caller's path.
func (rt *route) countDeath() {
	if rt.counted.Swap(true) {
		return
	}
	path := 0 // stop
	switch p := rt.panicked.Load(); {
	case p != nil:
		path = 2
		rt.cat.log.Error("catalog: a route body panicked; its consumer died",
			"kind", rt.side.kind, "name", quote.Name(rt.name), "panic", p.value, "stack", string(p.stack))
	case rt.ref.Cause() == owner.Cancelled:
		path = 1
	case rt.ref.Cause() == owner.Dropped:
		path = 3
		rt.cat.log.Warn("catalog: a consumer was dropped without Stop; its route ended at garbage collection",
			"kind", rt.side.kind, "name", quote.Name(rt.name))
	}
	rt.cat.counts.deaths[path].Add(1)
}

// readied marks a start complete. A death that the reclaim saw first is
// counted here: the two look at each other's flag, so one of them counts.
func (rt *route) readied() {
	rt.ready.Store(true)
	if h := rt.cat.hooks; h != nil && h.readying != nil {
		h.readying(rt.name)
	}
	if rt.retired.Load() {
		rt.countDeath()
	}
}

// deathSeen is the reclaim's half of readied.
func (rt *route) deathSeen() {
	if rt.ready.Load() {
		rt.countDeath()
	}
}

func (c *Catalog) counted() (CallCounts, DeathCounts) {
	var sum [numOutcomes]uint64
	for i := range c.counts.calls {
		for o := range sum {
			sum[o] += c.counts.calls[i].n[o].Load()
		}
	}
	d := &c.counts.deaths
	return CallCounts{
			OK: sum[outOK], HandlerError: sum[outHandlerError], Panicked: sum[outPanicked],
			Denied: sum[outDenied], Gone: sum[outGone], Overloaded: sum[outOverloaded],
			Unknown: sum[outUnknown], Invalid: sum[outInvalid], Canceled: sum[outCanceled],
		}, DeathCounts{
			Stop: d[0].Load(), Cancel: d[1].Load(), Panic: d[2].Load(), Drop: d[3].Load(),
		}
}

// countRefusal counts a start refused as a duplicate or at the cap.
func (c *Catalog) countRefusal(err error) {
	switch {
	case errors.Is(err, ErrDuplicate):
		c.counts.duplicates.Add(1)
	case errors.Is(err, ErrCapReached):
		c.counts.capRefusals.Add(1)
	}
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
