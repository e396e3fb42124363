package bindsec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// Errors a Book returns from its registry: the same values as shardreg's
// (and catalog's), defined there once, so that one errors.Is check covers
// every name.
var (
	// ErrInvalidName: the route name is empty, too long or not UTF-8.
	ErrInvalidName = shardreg.ErrInvalidName
	// ErrDeadOwner: the registering owner is already dead.
	ErrDeadOwner = shardreg.ErrDeadOwner
)

// MissingPlanMode says what Guard does for a route with no live plan.
type MissingPlanMode uint8

const (
	// Deny refuses requests to a route without a live plan (ErrNoPlan).
	// It is the default.
	Deny MissingPlanMode = iota
	// PassThrough admits them unauthenticated, as ADR-0068's reference
	// system does. Routes still cannot lose a live owner's plan to a late
	// stop.
	PassThrough
)

// String returns "deny" or "pass-through".
func (m MissingPlanMode) String() string {
	switch m {
	case Deny:
		return "deny"
	case PassThrough:
		return "pass-through"
	}
	return fmt.Sprintf("MissingPlanMode(%d)", uint8(m))
}

// RoutePlan is a route's plan, as Plans lists it.
type RoutePlan struct {
	Route string
	Plan  Plan
}

// An Option configures a Book.
type Option func(*Book)

// WithMissingPlan sets what Guard does for a route without a live plan.
func WithMissingPlan(m MissingPlanMode) Option { return func(b *Book) { b.mode = m } }

// withClock replaces time.Now, for tests of expiry.
func withClock(now func() time.Time) Option { return func(b *Book) { b.now = now } }

// Book is the set of route security plans, each owned by the consumer that
// registered it. All methods are safe for concurrent use.
type Book struct {
	plans   *shardreg.Registry[Plan]
	mode    MissingPlanMode
	now     func() time.Time
	reclaim reclaim // the amortised sweep of dead plans; see reclaim.go
}

// NewBook makes an empty book; by default a route without a plan is denied.
func NewBook(opts ...Option) *Book {
	// NoCap cannot be refused, so New cannot fail.
	plans, err := shardreg.New[Plan](shardreg.WithCap(shardreg.NoCap))
	if err != nil {
		panic(err)
	}
	b := &Book{plans: plans, mode: Deny, now: time.Now}
	for _, opt := range opts {
		opt(b)
	}
	return b
}

// Mode returns the book's missing-plan mode.
func (b *Book) Mode() MissingPlanMode { return b.mode }

// RegisterPlan stores a copy of p as route's plan, owned by o. A plan held
// by a live owner is kept and ErrPlanHeld returned, so that a failed
// duplicate start cannot touch the incumbent's plan; a dead owner's plan is
// replaced. It also returns ErrInvalidName and ErrDeadOwner. Now and then a
// successful call also sweeps the book's dead plans; see Prune.
func (b *Book) RegisterPlan(route string, p Plan, o owner.Ref) error {
	if err := p.checkRegister("register plan", route); err != nil {
		return err
	}
	err := b.plans.RegisterReady(route, p.clone(), o)
	if errors.Is(err, shardreg.ErrDuplicate) {
		return fmt.Errorf("register plan %s: %w", quote.Name(route), ErrPlanHeld)
	}
	if err != nil {
		return wrap("register plan", err)
	}
	b.registered()
	return nil
}

// RegisterPlanTakeover stores a copy of p as route's plan, owned by o,
// overwriting any plan there, live or dead. Only the consumer that won the
// route entry may call it: it re-asserts its own plan over a plan that a
// losing contender registered meanwhile. It returns ErrInvalidName and
// ErrDeadOwner. Like RegisterPlan, it now and then sweeps dead plans.
func (b *Book) RegisterPlanTakeover(route string, p Plan, o owner.Ref) error {
	if err := p.checkRegister("take over plan", route); err != nil {
		return err
	}
	if err := b.plans.Overwrite(route, p.clone(), o); err != nil {
		return wrap("take over plan", err)
	}
	b.registered()
	return nil
}

// UnregisterPlanOwned removes route's plan only when it was registered by
// o (owner.Ref.Same), whether o is alive or not, and reports whether it
// did. A late stop of a dead owner therefore never removes a replacement's
// plan.
func (b *Book) UnregisterPlanOwned(route string, o owner.Ref) bool {
	return b.plans.UnregisterOwned(route, o)
}

// PlanFor returns route's live plan. A dead owner's plan is ignored and
// reclaimed. The returned plan is the stored one, not a copy: it is
// read-only. PlanFor takes no lock and does not allocate.
func (b *Book) PlanFor(route string) (Plan, bool) {
	p, _, ok := b.plans.Lookup(route)
	return p, ok
}

// Lookup is PlanFor that also returns the plan's owner.
func (b *Book) Lookup(route string) (Plan, owner.Ref, bool) {
	return b.plans.Lookup(route)
}

// Plans returns the live plans sorted by route. The plans' Roles slices are
// shared and read-only.
func (b *Book) Plans() []RoutePlan {
	entries := b.plans.ListReady()
	out := make([]RoutePlan, len(entries))
	for i, e := range entries {
		out[i] = RoutePlan{Route: e.Name, Plan: e.Value}
	}
	return out
}

// Guard decides whether a request may run route's body. It finds the live
// plan, authenticates credential with a, and authorizes the principal,
// returning it. It refuses with ErrUnauthenticated (no credential, an
// unknown one, or no authenticator), ErrForbidden, ErrExpired, or, for a
// route without a live plan in Deny mode, ErrNoPlan (ErrInvalidName when
// the route name could never have had one). A public plan, or a missing
// plan in PassThrough mode, admits the request with the zero Principal
// without looking at the credential. The returned principal may share its
// Roles slice with the authenticator: it is read-only.
func (b *Book) Guard(ctx context.Context, route, credential string, a Authenticator) (Principal, error) {
	p, ok := b.PlanFor(route)
	if !ok {
		return b.MissingPlan(route)
	}
	return b.check(ctx, route, p, credential, a)
}

// GuardOwned is Guard for a request already bound to the route entry of
// owner o, an owner that registered a plan for the route: it admits the
// request only under o's own live plan. Any other state refuses it with
// ErrPlanOwner, never checking it against another owner's rules and never
// falling back to the missing-plan mode: another owner's plan means the
// route is changing hands, and no plan of o's means o died or is stopping
// (its plan was removed, or overwritten by a successor that died in turn).
// A route whose owner registered no plan is guarded with MissingPlan.
func (b *Book) GuardOwned(ctx context.Context, route string, o owner.Ref, credential string, a Authenticator) (Principal, error) {
	p, po, ok := b.Lookup(route)
	if !ok || !po.Same(o) {
		return Principal{}, &routeError{route, ErrPlanOwner}
	}
	return b.check(ctx, route, p, credential, a)
}

// MissingPlan returns what Guard answers for a route without a live plan:
// the zero Principal and nil in PassThrough mode, ErrNoPlan in Deny mode,
// ErrInvalidName for a name that could never hold a plan. A dispatcher uses
// it for a route whose owner registered no plan, after checking that no
// other owner's plan is in force.
func (b *Book) MissingPlan(route string) (Principal, error) {
	// Checked only here, off the hit path: a name that can hold no plan
	// gets the clearer error.
	if err := b.plans.Validate(route); err != nil {
		return Principal{}, err
	}
	if b.mode == PassThrough {
		return Principal{}, nil
	}
	return Principal{}, &routeError{route, ErrNoPlan}
}

func (b *Book) check(ctx context.Context, route string, p Plan, credential string, a Authenticator) (Principal, error) {
	if p.Public {
		return Principal{}, nil
	}
	pr, err := enforce(ctx, p, credential, a, b.now)
	if err != nil {
		return Principal{}, &routeError{route, err}
	}
	return pr, nil
}

// routeError is a refusal on the guard's path, where a busy server meets
// them often (every call with a bad credential): one small allocation, and
// the route's name is quoted (and truncated) only if the message is read.
type routeError struct {
	route string
	err   error
}

func (e *routeError) Error() string { return "route " + quote.Name(e.route) + ": " + e.err.Error() }
func (e *routeError) Unwrap() error { return e.err }

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Check decides a request against plan p, which the caller found for route
// (with Lookup) and has bound to the right owner: a public plan admits it
// with the zero Principal; otherwise credential is authenticated with a and
// the principal authorized, with Guard's errors. A dispatcher that must
// check the plan's owner itself uses it to look the plan up only once.
func (b *Book) Check(ctx context.Context, route string, p Plan, credential string, a Authenticator) (Principal, error) {
	return b.check(ctx, route, p, credential, a)
}
