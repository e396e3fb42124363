package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// The demo of what livereg is for: a consumer that clients can watch die
// and come back. The public tool fortune belongs to a consumer of its
// own; the admin-only tools demo_crash and demo_restart end it (by Stop,
// by cancelling its context, by a panic in its body, or by dropping the
// last reference to it) and start it again. Each death takes fortune out
// of tools/list and sends notifications/tools/list_changed to every
// connected client; a restart takes the name over. The tool ops_report
// needs the role ops, so that a role denial can be seen.
const (
	victimName  = "fortune"
	crashName   = "demo_crash"
	restartName = "demo_restart"
	opsName     = "ops_report"
	adminRole   = "admin"
	opsRole     = "ops"
)

// deathWait bounds how long demo_crash waits to see the death it caused:
// a drop needs the garbage collector to notice.
const deathWait = 5 * time.Second

var errVictimRunning = errors.New("already running")

// victim is the consumer that owns fortune. Its methods are safe for
// concurrent use; mu serializes crashes and restarts.
type victim struct {
	cat  *catalog.Catalog
	base context.Context // what the consumer's context derives from
	log  *slog.Logger

	mu     sync.Mutex
	k      *catalog.Consumer // nil once dropped or dead
	done   <-chan struct{}   // the current consumer's Done, nil before the first start
	cancel context.CancelFunc
	gen    int

	armed atomic.Bool // the next fortune call panics
}

// start starts fortune, generation gen+1, unless it is live.
func (v *victim) start() (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done != nil {
		select {
		case <-v.done:
		default:
			return v.gen, fmt.Errorf("%s is %w (generation %d); crash it first", victimName, errVictimRunning, v.gen)
		}
	}
	gen := v.gen + 1
	ctx, cancel := context.WithCancel(v.base)
	k, err := v.cat.StartTool(ctx, catalog.Tool{
		Name: victimName, Title: "Fortune",
		Description: "Returns a fortune and the generation of the consumer serving it; admins can crash and restart it (demo_crash, demo_restart).",
	}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		if v.armed.CompareAndSwap(true, false) {
			panic("demo_crash: a panic in the fortune body, as asked")
		}
		return catalog.TextResult(fmt.Sprintf("generation %d says: a dead consumer's tools leave the listing at once", gen)), nil
	})
	if err != nil {
		cancel()
		return v.gen, err
	}
	v.k, v.done, v.cancel, v.gen = k, k.Done(), cancel, gen
	return gen, nil
}

// crash ends the live fortune consumer the way how says, and waits (at
// most deathWait) for the catalog to see it dead.
func (v *victim) crash(ctx context.Context, how string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.k == nil {
		return fmt.Errorf("%s is not running; restart it with %s", victimName, restartName)
	}
	select {
	case <-v.done:
		v.k = nil
		return fmt.Errorf("%s is not running; restart it with %s", victimName, restartName)
	default:
	}
	// Held until the death is seen, so that only a drop can be one.
	k := v.k
	switch how {
	case "stop":
		if err := v.k.Stop(ctx); err != nil {
			return err
		}
	case "cancel":
		v.cancel()
	case "panic":
		v.armed.Store(true)
		_, err := v.cat.CallTool(ctx, victimName, nil, "")
		if !errors.Is(err, catalog.ErrRoutePanicked) {
			v.armed.Store(false)
			return fmt.Errorf("the fortune body did not panic: %v", err)
		}
	case "drop":
		// The last reference goes; the garbage collector finds the
		// consumer unreachable and the catalog reclaims its routes. The
		// context is not cancelled: nothing but the drop kills it.
		v.log.Warn("demo: dropping the fortune consumer without stopping it", "tool", victimName)
		k = nil
	default:
		// %.64q quotes at most 64 runes of the client's string, so that a
		// long one cannot blow up the answer (the core's internal/quote is
		// not the cmd module's to import).
		return fmt.Errorf("how %.64q: must be stop, cancel, panic or drop", how)
	}
	v.k = nil
	wait := time.NewTimer(deathWait)
	defer wait.Stop()
	for {
		if k == nil {
			runtime.GC()
		}
		select {
		case <-v.done:
			runtime.KeepAlive(k)
			return nil
		case <-wait.C:
			return fmt.Errorf("%s did not die within %v", victimName, deathWait)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop ends the live consumer at shutdown.
func (v *victim) stop(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.k != nil {
		_ = v.k.Stop(ctx)
	}
	if v.cancel != nil {
		v.cancel()
	}
}

// startVictimDemo starts fortune and the tools that crash and restart it,
// and ops_report. The returned victim must be stopped at shutdown. In a
// fleet, demo_crash and demo_restart act on the fortune consumer of the
// replica that serves them, which may not be the one serving fortune.
func startVictimDemo(ctx context.Context, cat *catalog.Catalog, log *slog.Logger, adopt *adopter) (*victim, []*catalog.Consumer, error) {
	v := &victim{cat: cat, base: ctx, log: log}
	if _, err := v.start(); err != nil {
		if adopt == nil || !errors.Is(err, catalog.ErrDuplicate) {
			return nil, nil, err
		}
		// Another replica's fortune: this one starts its own once that
		// one is gone. The victim owns the consumer, not the adopter.
		adopt.add(adoption{catalog.KindTool, victimName, func() (*catalog.Consumer, error) {
			_, err := v.start()
			return nil, err
		}})
	}
	admin := bindsec.Plan{Roles: []string{adminRole}}
	s := &starter{ctx: ctx, cat: cat, adopt: adopt}
	s.tool(catalog.Tool{
		Name: crashName, Title: "Crash the fortune consumer",
		Description: "Ends the consumer that serves fortune: by stop, cancel (its context), panic (in its body) or drop (the last reference, found by the garbage collector). Needs the role admin.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"how":{"type":"string","enum":["stop","cancel","panic","drop"]}},"required":["how"]}`),
	}, admin, func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
		var in struct {
			How string `json:"how"`
		}
		if err := json.Unmarshal(orEmptyObject(c.Arguments), &in); err != nil {
			return catalog.ErrorResult(`demo_crash needs {"how": "stop" | "cancel" | "panic" | "drop"}`), nil
		}
		if err := v.crash(ctx, in.How); err != nil {
			return catalog.ErrorResult("demo_crash: " + err.Error()), nil
		}
		return catalog.TextResult(fmt.Sprintf("%s died by %s; it is gone from tools/list", victimName, in.How)), nil
	})
	s.tool(catalog.Tool{
		Name: restartName, Title: "Restart the fortune consumer",
		Description: "Starts a new consumer for fortune, which takes the name over. Needs the role admin.",
	}, admin, func(context.Context, catalog.Call) (catalog.Result, error) {
		gen, err := v.start()
		if err != nil {
			return catalog.ErrorResult("demo_restart: " + err.Error()), nil
		}
		return catalog.TextResult(fmt.Sprintf("%s restarted: generation %d", victimName, gen)), nil
	})
	s.tool(catalog.Tool{
		Name: opsName, Title: "Operations report",
		Description: "Reports the catalog's routes; needs the role ops.",
	}, bindsec.Plan{Roles: []string{opsRole}}, func(context.Context, catalog.Call) (catalog.Result, error) {
		st := cat.Stats()
		return catalog.TextResult(fmt.Sprintf("%d tools and %d resources live; catalog version %d", st.Tools, st.Resources, st.Version)), nil
	})
	ks, err := s.done()
	if err != nil {
		v.stop(context.Background())
		return nil, nil, err
	}
	return v, ks, nil
}
