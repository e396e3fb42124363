package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// Defaults for a zero Config and for start options.
const (
	DefaultCap        = shardreg.DefaultCap
	DefaultQueueDepth = 64
	DefaultWorkers    = 4
)

// ErrInvalidCursor: a cursor passed to ToolsPage or ResourcesPage was not
// made by them.
var ErrInvalidCursor = shardreg.ErrInvalidCursor

// Config configures a Catalog. The zero Config is valid: caps of 128, a
// queue of DefaultQueueDepth per route, missing plans denied, and no
// authenticator, so that only public routes can be called.
type Config struct {
	// MaxTools and MaxResources cap the routes of each kind, dead routes
	// not yet reclaimed included. 0 means DefaultCap.
	MaxTools, MaxResources int
	// MissingPlan says what a call to a route without a live plan gets.
	MissingPlan bindsec.MissingPlanMode
	// Authenticator turns credentials into principals. nil admits no
	// credential at all: only public routes can be called.
	Authenticator bindsec.Authenticator
	// QueueDepth bounds the calls waiting for a route's goroutines; a call
	// beyond it gets ErrOverloaded. 0 means DefaultQueueDepth.
	QueueDepth int
}

// Catalog holds the tool and resource routes of an MCP server. All methods
// are safe for concurrent use. A Catalog starts no goroutines of its own;
// each consumer brings its bridge goroutines, which end with it.
type Catalog struct {
	tools, resources side
	auth             bindsec.Authenticator
	queueDepth       int
	changed          atomic.Pointer[chan struct{}]
	toolList         atomic.Pointer[projection[Tool]]
	resourceList     atomic.Pointer[projection[Resource]]
	beforeReady      func(name string) // test hook; nil otherwise
	beforeRetire     func(name string) // test hook; nil otherwise
}

// side is one namespace of routes: tools by name, or resources by URI, each
// with its own plans.
type side struct {
	kind    string // "tool" or "resource", for errors
	unknown error
	reg     *shardreg.Registry[*route]
	book    *bindsec.Book
}

// New makes an empty catalog, or returns ErrInvalidConfig.
func New(cfg Config) (*Catalog, error) {
	if cfg.MaxTools < 0 || cfg.MaxResources < 0 || cfg.QueueDepth < 0 {
		return nil, fmt.Errorf("%w: negative cap or queue depth", ErrInvalidConfig)
	}
	if cfg.MissingPlan != bindsec.Deny && cfg.MissingPlan != bindsec.PassThrough {
		return nil, fmt.Errorf("%w: missing-plan mode %v", ErrInvalidConfig, cfg.MissingPlan)
	}
	c := &Catalog{auth: cfg.Authenticator, queueDepth: orDefault(cfg.QueueDepth, DefaultQueueDepth)}
	var err error
	c.tools, err = newSide("tool", ErrUnknownTool, orDefault(cfg.MaxTools, DefaultCap), shardreg.ToolName, cfg.MissingPlan)
	if err != nil {
		return nil, err
	}
	c.resources, err = newSide("resource", ErrUnknownResource, orDefault(cfg.MaxResources, DefaultCap), shardreg.ResourceURI, cfg.MissingPlan)
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	c.changed.Store(&ch)
	return c, nil
}

func newSide(kind string, unknown error, capacity int, validate func(string) error, mode bindsec.MissingPlanMode) (side, error) {
	reg, err := shardreg.New[*route](shardreg.WithCap(capacity), shardreg.WithValidator(validate))
	if err != nil {
		return side{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return side{kind: kind, unknown: unknown, reg: reg, book: bindsec.NewBook(bindsec.WithMissingPlan(mode))}, nil
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// Authenticator returns the authenticator the catalog was configured with,
// or nil. A server uses it to refuse exposure beyond loopback when no
// request could ever be authenticated.
func (c *Catalog) Authenticator() bindsec.Authenticator { return c.auth }

// A StartOption configures one consumer's route.
type StartOption func(*startConfig) error

type startConfig struct {
	workers int
	noPlan  bool
}

// WithWorkers sets how many goroutines serve the route, that is, how many
// calls its body runs at once. n must be at least 1; the default is
// DefaultWorkers.
func WithWorkers(n int) StartOption {
	return func(s *startConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: %d workers, want at least 1", ErrInvalidConfig, n)
		}
		s.workers = n
		return nil
	}
}

// WithoutPlan starts the route without registering a security plan: its
// calls fall under Config.MissingPlan, denied by default. The plan passed
// to Start must then be the zero Plan.
func WithoutPlan() StartOption {
	return func(s *startConfig) error {
		s.noPlan = true
		return nil
	}
}

// StartTool starts a consumer serving tool t with handler h under plan p.
// Cancelling ctx kills the consumer. On error nothing is left behind: the
// token is released and, if another consumer holds the name, its entry and
// plan are untouched. Errors: ErrInvalidName, ErrInvalidRoute,
// ErrInvalidConfig, ErrDuplicate (a live consumer holds the name),
// ErrCapReached, ErrDeadOwner (ctx already done, or the consumer died while
// starting), each wrapped with the tool's name.
func (c *Catalog) StartTool(ctx context.Context, t Tool, p bindsec.Plan, h ToolHandler, opts ...StartOption) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("catalog: start tool %q: %w: nil handler", t.Name, ErrInvalidRoute)
	}
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else if !isJSONObject(t.InputSchema) {
		return nil, fmt.Errorf("catalog: start tool %q: %w: input schema is not a JSON object", t.Name, ErrInvalidRoute)
	}
	if len(t.OutputSchema) > 0 && !isJSONObject(t.OutputSchema) {
		return nil, fmt.Errorf("catalog: start tool %q: %w: output schema is not a JSON object", t.Name, ErrInvalidRoute)
	}
	t.InputSchema = bytes.Clone(t.InputSchema)
	t.OutputSchema = bytes.Clone(t.OutputSchema)
	rt := &route{tool: t, handle: func(inv *invocation) {
		inv.result, inv.err = h(inv.ctx, Call{Name: inv.name, Arguments: inv.args, Principal: inv.principal})
	}}
	return c.start(ctx, &c.tools, t.Name, p, rt, opts)
}

// StartResource starts a consumer serving resource r with reader rd under
// plan p. It behaves as StartTool, with resource URIs for names.
func (c *Catalog) StartResource(ctx context.Context, r Resource, p bindsec.Plan, rd ResourceReader, opts ...StartOption) (*Consumer, error) {
	if rd == nil {
		return nil, fmt.Errorf("catalog: start resource %q: %w: nil reader", r.URI, ErrInvalidRoute)
	}
	rt := &route{resource: r, handle: func(inv *invocation) {
		inv.contents, inv.err = rd(inv.ctx, Read{URI: inv.name, Principal: inv.principal})
		if inv.err == nil && inv.contents.URI == "" {
			inv.contents.URI = inv.name
		}
	}}
	return c.start(ctx, &c.resources, r.URI, p, rt, opts)
}

func isJSONObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// start runs ADR-0068's start sequence.
func (c *Catalog) start(ctx context.Context, s *side, name string, p bindsec.Plan, rt *route, opts []StartOption) (*Consumer, error) {
	wrap := func(err error) error { return fmt.Errorf("catalog: start %s %q: %w", s.kind, name, err) }
	cfg := startConfig{workers: DefaultWorkers}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, wrap(err)
		}
	}
	if err := s.reg.Validate(name); err != nil {
		return nil, wrap(err)
	}
	if cfg.noPlan && (p.Public || p.Roles != nil) {
		return nil, wrap(fmt.Errorf("%w: a plan given with WithoutPlan", ErrInvalidConfig))
	}
	rt.planned = !cfg.noPlan

	// 1. The owner token, from ctx: cancelling ctx is the task abort.
	tok := owner.NewContext(ctx)
	ref := tok.Ref()
	rt.init(c, s, name, ref, tok.Releaser(), cfg.workers, c.queueDepth)
	fail := func(err error) (*Consumer, error) {
		s.book.UnregisterPlanOwned(name, ref)
		tok.Release()
		return nil, wrap(err)
	}

	// 2. The plan. A live incumbent's plan is kept (ErrPlanHeld); whether
	// this start may go on is for the entry to decide.
	if rt.planned {
		if err := s.book.RegisterPlan(name, p, ref); err != nil && !errors.Is(err, bindsec.ErrPlanHeld) {
			return fail(err)
		}
	}
	// 3. The entry: the duplicate guard and the cap. Cleanup is
	// owner-conditional, so a failed start leaves the incumbent's plan.
	if err := s.reg.Register(name, rt, ref); err != nil {
		return fail(err)
	}
	// 4. The winner re-asserts its plan over whatever a losing contender
	// registered meanwhile.
	if rt.planned {
		if err := s.book.RegisterPlanTakeover(name, p, ref); err != nil {
			s.reg.UnregisterOwned(name, ref)
			return fail(err)
		}
	}
	// 5. The bridge, then ready.
	rt.startWorkers()
	if c.beforeReady != nil {
		c.beforeReady(name)
	}
	if !s.reg.MarkReady(name, ref) {
		s.reg.UnregisterOwned(name, ref)
		return fail(ErrDeadOwner)
	}
	c.notify()
	return &Consumer{tok: tok, rt: rt}, nil
}

// Consumer is the owner of one started route: holding it keeps the route
// alive. Dropping it without Stop ends the route at the next garbage
// collection, like losing a context's cancel function; call Stop.
type Consumer struct {
	tok     *owner.Token
	rt      *route
	stopped atomic.Bool
}

// Stop ends the consumer gracefully: it removes the route entry (only if it
// is still this consumer's), waits, bounded by ctx, for the calls that
// already reached the route to finish, then kills the owner token, removes
// the plan (again owner-conditionally) and waits for the route's goroutines
// to exit. It returns ctx's error if ctx ended the wait early; the consumer
// is stopped either way. A second Stop is a no-op that returns nil.
//
// A route body that stops its own consumer waits, within Stop, for its own
// call to finish: call Stop from a goroutine of its own there, or give it a
// ctx that ends.
func (k *Consumer) Stop(ctx context.Context) error {
	if !k.stopped.CompareAndSwap(false, true) {
		return nil
	}
	rt := k.rt
	if rt.side.reg.UnregisterOwned(rt.name, rt.ref) {
		rt.cat.notify()
	}
	err := rt.drain(ctx)
	k.tok.Release()
	rt.side.book.UnregisterPlanOwned(rt.name, rt.ref)
	if werr := rt.awaitWorkers(ctx); err == nil {
		err = werr
	}
	return err
}

// Done returns a channel that is closed when the consumer's owner dies, by
// any path: Stop, cancellation, a panic, or being dropped.
func (k *Consumer) Done() <-chan struct{} { return k.tok.Done() }

// Owner returns the consumer's owner Ref.
func (k *Consumer) Owner() owner.Ref { return k.tok.Ref() }

// Name returns the tool name or resource URI the consumer serves.
func (k *Consumer) Name() string { return k.rt.name }
