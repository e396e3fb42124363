package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/puzpuzpuz/xsync/v3"
)

// PlanResolver is the per-request path of a book of route security plans.
type PlanResolver interface {
	// PlanFor returns route's live plan, read-only.
	PlanFor(route string) (bindsec.Plan, bool)
	// Guard authenticates and authorizes a request to route.
	Guard(ctx context.Context, route, credential string, a bindsec.Authenticator) (bindsec.Principal, error)
}

// PlanBook is a book of plans with ADR-0068's owner discipline.
// *bindsec.Book implements it as it is.
type PlanBook interface {
	PlanResolver
	// RegisterPlan keeps a live owner's plan (bindsec.ErrPlanHeld) and
	// replaces a dead owner's.
	RegisterPlan(route string, p bindsec.Plan, o owner.Ref) error
	// RegisterPlanTakeover overwrites whatever plan route has.
	RegisterPlanTakeover(route string, p bindsec.Plan, o owner.Ref) error
	// UnregisterPlanOwned removes route's plan only when o registered it.
	UnregisterPlanOwned(route string, o owner.Ref) bool
}

// PlanImpl names a plan book implementation.
type PlanImpl struct {
	// Name is the impl= part of the benchmark names.
	Name string
	// New makes an empty book.
	New func() PlanBook
}

// PlanBooks lists the plan books under comparison, livereg first. Both
// deny a route without a live plan, livereg's default.
func PlanBooks() []PlanImpl {
	return []PlanImpl{
		{"livereg", func() PlanBook { return bindsec.NewBook() }},
		{"reference", func() PlanBook { return NewReferenceBook() }},
	}
}

// PlanFloor names a plan lookup floor.
type PlanFloor struct {
	// Name is the impl= part of the benchmark names.
	Name string
	// New makes an empty floor.
	New func() PlanResolver
}

// PlanFloors lists the plan lookup floors: bare map reads with no owner
// check. Their Guard does the same authentication as the books' after the
// bare lookup.
func PlanFloors() []PlanFloor {
	return []PlanFloor{
		{"floor-xsync", func() PlanResolver { return &xsyncPlanFloor{m: xsync.NewMapOf[string, *bindsec.Plan]()} }},
		{"floor-map", func() PlanResolver { return &mapPlanFloor{m: make(map[string]bindsec.Plan)} }},
	}
}

// PreloadPlan stores a plan for benchmark setup.
func PreloadPlan(dst PlanResolver, route string, p bindsec.Plan, o owner.Ref) error {
	switch d := dst.(type) {
	case PlanBook:
		return d.RegisterPlan(route, p, o)
	case planPreloader:
		d.preloadPlan(route, p)
		return nil
	}
	return fmt.Errorf("bench: %T cannot be filled", dst)
}

type planPreloader interface {
	preloadPlan(route string, p bindsec.Plan)
}

// ReferenceBook is the reference system's McpBindSecurity: one mutex
// around one map, with a retain sweep of dead owners' plans inside every
// PlanFor.
type ReferenceBook struct {
	mu    sync.Mutex
	plans map[string]refPlan
}

type refPlan struct {
	plan  bindsec.Plan
	owner owner.Ref
}

// NewReferenceBook makes an empty reference book.
func NewReferenceBook() *ReferenceBook {
	return &ReferenceBook{plans: make(map[string]refPlan)}
}

// RegisterPlan stores a copy of p unless a live owner holds route's plan.
func (b *ReferenceBook) RegisterPlan(route string, p bindsec.Plan, o owner.Ref) error {
	return b.register(route, p, o, false)
}

// RegisterPlanTakeover stores a copy of p over any plan route has.
func (b *ReferenceBook) RegisterPlanTakeover(route string, p bindsec.Plan, o owner.Ref) error {
	return b.register(route, p, o, true)
}

func (b *ReferenceBook) register(route string, p bindsec.Plan, o owner.Ref, overwrite bool) error {
	if err := checkName(route); err != nil {
		return err
	}
	if !o.Alive() {
		return refuse(route, bindsec.ErrDeadOwner)
	}
	p.Roles = slices.Clone(p.Roles)
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, held := b.plans[route]; held && !overwrite && cur.owner.Alive() {
		return fmt.Errorf("bench: register plan %q: %w", route, bindsec.ErrPlanHeld)
	}
	b.plans[route] = refPlan{plan: p, owner: o}
	return nil
}

// UnregisterPlanOwned removes route's plan when o registered it.
func (b *ReferenceBook) UnregisterPlanOwned(route string, o owner.Ref) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, held := b.plans[route]
	if !held || !cur.owner.Same(o) {
		return false
	}
	delete(b.plans, route)
	return true
}

// PlanFor sweeps every plan, then looks route up.
func (b *ReferenceBook) PlanFor(route string) (bindsec.Plan, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for r, p := range b.plans {
		if !p.owner.Alive() {
			delete(b.plans, r)
		}
	}
	p, ok := b.plans[route]
	return p.plan, ok
}

// Guard is PlanFor followed by authentication and authorization.
func (b *ReferenceBook) Guard(ctx context.Context, route, credential string, a bindsec.Authenticator) (bindsec.Principal, error) {
	p, ok := b.PlanFor(route)
	return guard(ctx, route, p, ok, credential, a)
}

// guard applies a plan the way bindsec.Book.Guard does in Deny mode.
func guard(ctx context.Context, route string, p bindsec.Plan, found bool, credential string, a bindsec.Authenticator) (bindsec.Principal, error) {
	if !found {
		return bindsec.Principal{}, fmt.Errorf("bench: route %q: %w", route, bindsec.ErrNoPlan)
	}
	if p.Public {
		return bindsec.Principal{}, nil
	}
	if credential == "" || a == nil {
		return bindsec.Principal{}, bindsec.ErrUnauthenticated
	}
	pr, err := a.Authenticate(ctx, credential)
	if err != nil {
		return bindsec.Principal{}, fmt.Errorf("%w: %w", bindsec.ErrUnauthenticated, err)
	}
	if err := p.Authorize(pr, time.Now()); err != nil {
		return bindsec.Principal{}, fmt.Errorf("bench: route %q: %w", route, err)
	}
	return pr, nil
}

// xsyncPlanFloor stores pointers, for the reason XsyncFloor does.
type xsyncPlanFloor struct {
	m *xsync.MapOf[string, *bindsec.Plan]
}

func (f *xsyncPlanFloor) PlanFor(route string) (bindsec.Plan, bool) {
	p, ok := f.m.Load(route)
	if !ok {
		return bindsec.Plan{}, false
	}
	return *p, true
}

func (f *xsyncPlanFloor) Guard(ctx context.Context, route, credential string, a bindsec.Authenticator) (bindsec.Principal, error) {
	p, ok := f.PlanFor(route)
	return guard(ctx, route, p, ok, credential, a)
}

func (f *xsyncPlanFloor) preloadPlan(route string, p bindsec.Plan) { f.m.Store(route, &p) }

type mapPlanFloor struct {
	m map[string]bindsec.Plan
}

func (f *mapPlanFloor) PlanFor(route string) (bindsec.Plan, bool) {
	p, ok := f.m[route]
	return p, ok
}

func (f *mapPlanFloor) Guard(ctx context.Context, route, credential string, a bindsec.Authenticator) (bindsec.Principal, error) {
	p, ok := f.m[route]
	return guard(ctx, route, p, ok, credential, a)
}

func (f *mapPlanFloor) preloadPlan(route string, p bindsec.Plan) { f.m[route] = p }

var (
	_ PlanBook = (*bindsec.Book)(nil)
	_ PlanBook = (*ReferenceBook)(nil)
)
