package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// route is what the registry stores for a name: the route's description,
// its body, and the gate its calls pass. It holds only a Ref of the owner
// (and a releaser that does not keep the token alive), so that a dropped
// Consumer's token can still be collected.
type route struct {
	cat  *Catalog
	side *side
	name string

	tool     Tool
	resource Resource
	callTool ToolHandler    // set for a tool route
	schemas  toolSchemas    // a tool route's, compiled at start
	read     ResourceReader // set for a resource route
	planned  bool           // the owner registered a security plan
	plan     bindsec.Plan   // that plan, a copy; immutable once the entry is published
	// What a prompt's or a template's route needs beyond the route, set
	// before it can be seen; nil for the other kinds.
	prompt   *promptRoute
	template *templateRoute

	ref     owner.Ref
	release func() // kills the owner: an unwound consumer is a dead one

	gate    gate
	limit   *limiter // nil: no limit on concurrent bodies
	retired atomic.Bool
	// ready and counted serve the death counts (stats.go).
	ready, counted atomic.Bool
	// panicked is the first panic of a body, kept with its stack until
	// the consumer's death logs it (stats.go); nil while none panicked.
	panicked atomic.Pointer[panicRecord]
	fleet    fleetHold  // the name's claim beyond this catalog, if any
	tasks    routeTasks // its tasks still working (task.go)
}

// panicRecord is a body's panic as the consumer's death logs it: the value,
// in full, and the stack of the goroutine it unwound, as
// runtime/debug.Stack formats it.
type panicRecord struct {
	value string
	stack []byte
}

// hooks are a catalog's test hooks (export_test.go); nil outside tests, so
// that each costs the hot path one nil check.
type hooks struct {
	beforeReady  func(name string) // a start, after the route is set up, before it is ready
	beforeRetire func(name string) // the reclaim of a dead owner's route, first thing
	afterLookup  func(name string) // a call, between its lookup and its guard
	beforeAdmit  func(name string) // a call, between its guard and the gate
	beforeDrain  func(name string) // a Stop, after removing the entry, before draining
	admitting    func()            // a call, between its announcement and its liveness check
	held         func()            // a dying owner found an admission in progress
	draining     func()            // a Stop's drain found bodies running and waits
	leaving      func()            // a call leaving the gate, between its subtraction and its look at closing
	closed       func()            // a Stop's drain, after closing the gate, before looking for calls
	readying     func(name string) // a start, between marking itself complete and looking whether the reclaim ran
}

// retire reclaims a dead owner's route entry and plan, once, owner-
// conditionally: a successor's are never touched. It runs in a goroutine of
// its own once the owner is dead (owner.Ref.AfterDeath).
func (rt *route) retire() {
	if !rt.retired.CompareAndSwap(false, true) {
		return
	}
	rt.deathSeen()
	if h := rt.cat.hooks; h != nil && h.beforeRetire != nil {
		h.beforeRetire(rt.name)
	}
	rt.side.reg.UnregisterOwned(rt.name, rt.ref)
	// The tasks end before the fleet claim is released, which may wait
	// on the network: their watchers hear the death at once.
	rt.endTasks()
	rt.releaseFleet()
	// Signal even when a listing or a lookup reclaimed the entry first:
	// that reclaim moved the version but signalled nobody. A spurious
	// wake-up costs a version comparison.
	rt.cat.notify()
}

func (rt *route) gone() error {
	return fmt.Errorf("catalog: %s %q: %w", rt.side.kind, rt.name, ErrRouteGone)
}

// admit takes a slot, if the route has a limit, then passes the gate. On
// success the caller runs the body and then calls finish.
func (rt *route) admit(ctx context.Context) (*stripe, error) {
	if rt.limit != nil {
		if err := rt.limit.acquire(ctx, rt.ref.Done(), rt); err != nil {
			return nil, err
		}
	}
	// After the slot: a call that waited for one while the owner died must
	// find the death here.
	s, ok := rt.gate.enter(rt.ref)
	if !ok {
		if rt.limit != nil {
			rt.limit.release()
		}
		return nil, rt.gone()
	}
	return s, nil
}

// finish ends a body that admit admitted; *returned is the frame's
// bodyReturned flag, set once the body (and any code of the consumer's
// that runs in the call) returned. Deferred directly, it recovers a
// panicking body: the caller gets ErrRoutePanicked with a short quote of
// the value (and the value itself, when it is an error, through Unwrap),
// and the consumer dies, since its code unwound. A body that called
// runtime.Goexit neither returned nor panicked: its consumer dies the
// same way and *err is ErrRouteExited, which a task records; the Goexit
// then goes on unwinding the goroutine, past the caller. Either way the
// slot and the gate are released here. The value and the stack of the
// unwound goroutine, taken here while the body's frames are still on it,
// go to the catalog's logger at the consumer's death (see countDeath):
// the operator gets where, the caller only what.
func (rt *route) finish(ctx context.Context, s *stripe, err *error, returned *bool) {
	if rt.unwound(recover(), *returned, err) {
		rt.release()
	}
	rt.exit(ctx, s, *err)
}

// unwound tells how a body left: p is what finish recovered, returned its
// frame's flag. For a panic or a Goexit it keeps the first one's record
// for the log, sets *err and reports true; the caller then kills the
// consumer. It runs in a deferred call, while the body's frames are still
// on the stack that debug.Stack reads.
func (rt *route) unwound(p any, returned bool, err *error) bool {
	switch {
	case p != nil:
		v := fmt.Sprint(p)
		// The first panic is the one that killed the consumer; bodies
		// panicking after it, already admitted, add nothing to the log.
		rt.panicked.CompareAndSwap(nil, &panicRecord{value: v, stack: debug.Stack()})
		*err = rt.panicErr(p, v)
	case !returned:
		rt.panicked.CompareAndSwap(nil, &panicRecord{value: "runtime.Goexit", stack: debug.Stack()})
		*err = rt.exitErr()
	default:
		return false
	}
	return true
}

// exit releases what admit took, and counts the call by its error. The
// slot goes before the gate, so that once Stop's drain saw the gate empty
// no slot is held either.
func (rt *route) exit(ctx context.Context, s *stripe, err error) {
	if rt.limit != nil {
		rt.limit.release()
	}
	rt.gate.exit(s)
	rt.cat.countCall(ctx, err)
}

// CallTool calls the tool name with args, presenting credential (a bearer
// token without its prefix; "" for none) to the route's plan, and runs the
// tool's body on the calling goroutine. The arguments are checked against
// the tool's input schema after the plan admits the call and before the
// body runs, and the result against its output schema, if it has one (see
// schema.go's comment). Options: WithClient. Errors: ErrNotFound,
// ErrInvalidArguments, ErrRouteGone (also for a Round whose Instance is
// not the route's), ErrRoutePanicked, ErrOverloaded (only for a route
// started WithMaxConcurrent), ErrInvalidResult, a denial (see Denied), an
// *InputRequiredError (only in a Round, see Ask), the context's error, or
// the handler's own error.
//
// It is safe for concurrent use, lock-free when the route has no limit, and
// does not allocate beyond what the handler does when the tool's input
// schema asks only for an object and it has no output schema. Other
// schemas cost a decoding of the arguments (and of the result) and a
// validation per call.
//
// The request is built once, in place, and the body runs in this frame, so
// that the call and its result are copied no more than a direct call would.
func (c *Catalog) CallTool(ctx context.Context, name string, args json.RawMessage, credential string, opts ...CallOption) (res Result, err error) {
	var pr bindsec.Principal
	rt, err := c.resolve(ctx, &c.tools, name, credential, &pr)
	if err != nil {
		if len(opts) != 0 {
			err = c.roundGone(KindTool, name, err, opts)
		}
		return Result{}, c.refused(ctx, err)
	}
	if rt.tool.TaskSupport == TaskRequired && !takesTasks(opts) {
		return Result{}, c.refused(ctx, fmt.Errorf("catalog: tool %s: %w", quote.Name(name), ErrTaskRequired))
	}
	// Before the gate: a call with bad arguments holds no slot, and Stop
	// need not wait for its validation. Absent arguments to a tool that
	// asks only for an object, the commonest call, skip even the call.
	if len(args) != 0 || rt.schemas.in != nil {
		if err := rt.checkArgs(args); err != nil {
			return Result{}, c.refused(ctx, err)
		}
	}
	var round *Round
	var det *detach
	if len(opts) != 0 {
		ctx, round = withOptions(ctx, opts)
		if round != nil {
			if err := rt.checkRound(round); err != nil {
				return Result{}, c.refused(ctx, err)
			}
		}
		if takesTasks(opts) && rt.tool.TaskSupport != TaskForbidden {
			det = &detach{share: taskShareOf(opts)}
			ctx = context.WithValue(ctx, detachKey{}, det)
		}
	}
	s, err := rt.admit(ctx)
	if err != nil {
		return Result{}, c.refused(ctx, err)
	}
	var returned bool // bodyReturned: see finish
	defer rt.finish(ctx, s, &err, &returned)
	if rt.schemas.out == nil && round == nil && det == nil {
		// Returned as it comes: the result is copied no more than a direct
		// call would copy it.
		res, err = rt.callTool(ctx, Call{Name: name, Arguments: args, Principal: pr, Owner: rt.ref})
		returned = true
		return res, err
	}
	res, err = rt.callTool(ctx, Call{Name: name, Arguments: args, Principal: pr, Owner: rt.ref})
	if det != nil && det.rest != nil && errors.Is(err, errDetached) {
		// A caller that takes no tasks runs the rest here, still
		// admitted: it is the body's too.
		res, err = c.detached(ctx, rt, det, credential, ClientFrom(ctx))
		returned = true
		return res, err
	}
	returned = true
	if err != nil && round != nil {
		return Result{}, rt.endRound(round, err)
	}
	if err == nil && rt.schemas.out != nil {
		if err = rt.checkResult(&res); err != nil {
			res = Result{}
		}
	}
	return res, err
}

// readRoute reads read.URI through rt, a route that was found
// for it (by its URI, or by a template that matches it): the guard, the
// gate, then the reader on the caller's goroutine.
func (c *Catalog) readRoute(ctx context.Context, rt *route, read Read, credential string, opts []CallOption) (res Contents, err error) {
	if err := c.guard(ctx, rt, credential, &read.Principal); err != nil {
		return Contents{}, c.refused(ctx, err)
	}
	var round *Round
	if len(opts) != 0 {
		ctx, round = withOptions(ctx, opts)
		if round != nil {
			if err := rt.checkRound(round); err != nil {
				return Contents{}, c.refused(ctx, err)
			}
		}
	}
	if c.hooks != nil && c.hooks.beforeAdmit != nil {
		c.hooks.beforeAdmit(read.URI)
	}
	st, err := rt.admit(ctx)
	if err != nil {
		return Contents{}, c.refused(ctx, err)
	}
	var returned bool // bodyReturned: see finish
	defer rt.finish(ctx, st, &err, &returned)
	read.Owner = rt.ref
	res, err = rt.read(ctx, read)
	returned = true
	if err != nil && round != nil {
		return Contents{}, rt.endRound(round, err)
	}
	if err == nil && res.URI == "" {
		res.URI = read.URI
	}
	return res, err
}

// resolve looks the route up and guards it, setting *pr to the principal
// the guard admitted.
func (c *Catalog) resolve(ctx context.Context, s *side, name, credential string, pr *bindsec.Principal) (*route, error) {
	rt, _, ok := s.reg.Lookup(name)
	if !ok {
		return nil, &unknownError{s.unknown, name}
	}
	if c.hooks != nil && c.hooks.afterLookup != nil {
		c.hooks.afterLookup(name)
	}
	if err := c.guard(ctx, rt, credential, pr); err != nil {
		return nil, err
	}
	if c.hooks != nil && c.hooks.beforeAdmit != nil {
		c.hooks.beforeAdmit(name)
	}
	return rt, nil
}

// guard binds the request to the owner of the entry it resolved: it is
// checked against the plan in that entry and no other, since the entry
// carries its owner's plan and a name holds one entry. So a plan that
// another start wrote can never judge this owner's calls, a failed
// duplicate start never wrote one, and a dead owner's plan grants nothing,
// since its entry no longer resolves and its gate admits nobody. A route
// whose owner registered no plan falls under Config.MissingPlan: denied
// with ErrNoPlan by default.
//
// A public plan, the common case, is decided here without building a
// principal: *pr stays the zero Principal.
func (c *Catalog) guard(ctx context.Context, rt *route, credential string, pr *bindsec.Principal) error {
	if !rt.planned {
		if c.missing == bindsec.PassThrough {
			return nil
		}
		return &planError{rt.side.kind, rt.name, bindsec.ErrNoPlan}
	}
	if rt.plan.Public {
		return nil
	}
	var err error
	if *pr, err = rt.plan.Check(ctx, credential, c.auth); err != nil {
		if !rt.current() {
			// Denied by the plan of a route that has left the name since
			// the lookup: the route is gone, and the caller should retry
			// rather than look for other credentials, since the name may
			// have a successor with another plan.
			return rt.gone()
		}
		return &planError{rt.side.kind, rt.name, err}
	}
	return nil
}

// planError is a refusal by a route's plan (or for its lack of one), which
// a busy server meets often (every call with a bad credential): one small
// allocation, and the name is quoted (and truncated) only if the message
// is read.
type planError struct {
	kind Kind
	name string
	err  error
}

func (e *planError) Error() string {
	return "catalog: " + string(e.kind) + " " + quote.Name(e.name) + ": " + e.err.Error()
}
func (e *planError) Unwrap() error { return e.err }

// current reports whether the name still resolves to rt. A denial, not a
// hot path, pays for its second lookup.
func (rt *route) current() bool {
	cur, _, ok := rt.side.reg.Lookup(rt.name)
	return ok && cur == rt
}

// unknownError is ErrNotFound with what was asked for ("tool",
// "resource", "prompt") and its name. Unknown names are a busy server's
// commonest failure, so the error is one small allocation, and the name is
// quoted (and truncated) only if the message is read.
type unknownError struct {
	what string
	name string
}

func (e *unknownError) Error() string { return "catalog: unknown " + e.what + " " + quote.Name(e.name) }
func (e *unknownError) Unwrap() error { return ErrNotFound }
