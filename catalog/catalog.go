package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// defaultCap is the cap on routes of each kind for a zero Config.
const defaultCap = shardreg.DefaultCap

// ErrInvalidCursor: a cursor passed to a View's Page was not made by a
// Page of the same kind.
var ErrInvalidCursor = shardreg.ErrInvalidCursor

// Config configures a Catalog. The zero Config is valid: caps of 128,
// missing plans denied, and no authenticator, so that only public routes
// can be called.
type Config struct {
	// MaxTools and MaxResources cap the routes of each kind, dead routes
	// not yet reclaimed included. 0 means 128.
	MaxTools, MaxResources int
	// MaxPrompts and MaxTemplates cap prompts and resource templates the
	// same way; 0 means 128, and negative means the catalog holds
	// none of that kind (a server then advertises no prompts).
	MaxPrompts, MaxTemplates int
	// MissingPlan says what a call to a route without a live plan gets.
	MissingPlan bindsec.MissingPlanMode
	// Authenticator turns credentials into principals. nil admits no
	// credential at all: only public routes can be called. A typed nil (a
	// nil *StaticTokens in the interface) is refused with
	// ErrInvalidConfig: it would look configured and fail every call.
	Authenticator bindsec.Authenticator
	// Logger receives the catalog's warnings (a consumer dropped without
	// Stop) and errors (a body's panic, with its stack, at its consumer's
	// death). nil means slog.Default().
	Logger *slog.Logger
	// Claimer, if set, claims every route's name beyond this catalog while
	// its consumer starts (see Claimer). nil: the catalog is all there is.
	Claimer Claimer
	// Remote, if set, lists the routes other replicas hold, and the
	// catalog's listings show them too (see Remote; a RemoteSurface lists
	// prompts and templates too). nil: they list this catalog's routes
	// only.
	Remote Remote
	// MaxURIBytes bounds the URI of a read (ReadResource), of an owner lookup
	// (ResourceOwner, which subscriptions use) and of a template
	// completion: a longer one gets ErrInvalidArguments before any
	// lookup or match. 0 means 8 KiB; negative means no limit, and a
	// templated read then costs in proportion to whatever a client
	// sends (see ReadResource).
	MaxURIBytes int
	// MaxTasks caps the tasks the catalog holds (StartTask), working or
	// ended and not yet expired; MaxTasksPerCaller caps those of one
	// share: the credential's, or the one the call names
	// (WithTaskShare). 0 means 10,000 and 100.
	MaxTasks, MaxTasksPerCaller int
	// MaxAnonymousTasks caps the tasks that anonymous shares
	// (TaskShare.Anonymous) hold together. 0 means half of MaxTasks;
	// negative, no such cap.
	MaxAnonymousTasks int
	// MaxTaskLifetime bounds how long a task's body runs: at the bound
	// the task ends failed with ErrTaskLifetime, which its TaskInfo.Err
	// wraps, and its body's context is cancelled with that cause
	// (context.Cause). 0 means an hour; negative, no bound.
	MaxTaskLifetime time.Duration
	// MaxTaskResultBytes bounds the bytes of the results that ended tasks
	// keep; a result beyond it fails its task. 0 means 64 MiB.
	MaxTaskResultBytes int64
	// TaskTTL is how long an ended task is kept, its result with it. 0
	// means 15 minutes.
	TaskTTL time.Duration
}

// Catalog holds the tool and resource routes of an MCP server. All methods
// are safe for concurrent use. A Catalog and its consumers run no
// goroutines: bodies run on their callers' goroutines (a task's, which
// StartTask starts, on one of its own), and an owner's death reclaims its
// route from a goroutine that lives only for that.
type Catalog struct {
	// One side per kind, each a namespace of routes with its own plans,
	// and one lister per kind (view.go).
	tools, resources, prompts, templates side
	toolView                             lister[Tool]
	resourceView                         lister[Resource]
	promptView                           lister[Prompt]
	templateView                         lister[ResourceTemplate]
	// index finds the templates that may match a URI (template.go); subs
	// are the resource-update listeners (subscribe.go).
	index   templateIndex
	subs    updates
	auth    bindsec.Authenticator
	changed atomic.Pointer[chan struct{}]
	hooks   *hooks // test hooks; nil otherwise
	// beforeUnindex, a test hook, runs before a dead owner's template
	// leaves the index; nil outside tests.
	beforeUnindex func()
	claimer       Claimer
	remote        Remote
	surface       RemoteSurface // remote, when it is one; nil otherwise
	fleetTpl      fleetTemplates
	log           *slog.Logger
	counts        counters
	maxURI        int // Config.MaxURIBytes resolved; -1 for none
	missing       bindsec.MissingPlanMode
	// nonce, random, names this catalog in its routes' instances (see
	// route.instance).
	nonce string
	tasks *taskStore // task.go
}

// side is one kind's namespace of routes (tools by name, resources by URI,
// prompts by name, templates by key), with its own plans.
type side struct {
	kind    Kind
	unknown string // what the side holds, as an unknown name's error says it
	// reg holds the kind's routes, each entry with its plan: a name and
	// its plan are claimed, replaced and removed in one step.
	reg *shardreg.Registry[*route]
}

// New makes an empty catalog, or returns ErrInvalidConfig.
func New(cfg Config) (*Catalog, error) {
	if cfg.MaxTools < 0 || cfg.MaxResources < 0 {
		return nil, fmt.Errorf("%w: negative cap", ErrInvalidConfig)
	}
	if err := bindsec.CheckAuthenticator(cfg.Authenticator); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.MissingPlan != bindsec.Deny && cfg.MissingPlan != bindsec.PassThrough {
		return nil, fmt.Errorf("%w: missing-plan mode %v", ErrInvalidConfig, cfg.MissingPlan)
	}
	c := &Catalog{auth: cfg.Authenticator, claimer: cfg.Claimer, remote: cfg.Remote, log: loggerOr(cfg.Logger), maxURI: maxURI(cfg.MaxURIBytes), missing: cfg.MissingPlan}
	c.surface, _ = cfg.Remote.(RemoteSurface)
	c.counts.calls = new([callStripes]callStripe)
	c.nonce = newNonce()
	var err error
	if c.tasks, err = newTaskStore(cfg); err != nil {
		return nil, err
	}
	c.tools, err = newSide(KindTool, "tool", orDefault(cfg.MaxTools, defaultCap), shardreg.ToolName)
	if err != nil {
		return nil, err
	}
	c.resources, err = newSide(KindResource, "resource", orDefault(cfg.MaxResources, defaultCap), shardreg.ResourceURI)
	if err != nil {
		return nil, err
	}
	// A negative cap turns prompts or templates off: the side is made with
	// a cap of one that nothing fills, so that every method works on it.
	c.prompts, err = newSide(KindPrompt, "prompt", capOrOff(cfg.MaxPrompts), promptName)
	if err != nil {
		return nil, err
	}
	c.templates, err = newSide(KindTemplate, "resource", capOrOff(cfg.MaxTemplates), templateKey)
	if err != nil {
		return nil, err
	}
	c.initViews(cfg.MaxPrompts < 0, cfg.MaxTemplates < 0)
	ch := make(chan struct{})
	c.changed.Store(&ch)
	if c.remote != nil {
		c.remote.Watch(c.notify)
	}
	return c, nil
}

func newSide(kind Kind, unknown string, capacity int, validate func(string) error) (side, error) {
	reg, err := shardreg.New[*route](shardreg.WithCap(capacity), shardreg.WithValidator(validate))
	if err != nil {
		return side{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return side{kind: kind, unknown: unknown, reg: reg}, nil
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
	maxConcurrent int // 0: no limit
	waitingRoom   int // -1: defaultWaitingRoom
	noPlan        bool
	completer     Completer // WithCompleter
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
	// Compiled once, here, before anything is registered: a schema that
	// does not compile leaves nothing behind.
	schemas, err := compileTool(t)
	if err != nil {
		return nil, fmt.Errorf("catalog: start tool %q: %w: %w", t.Name, ErrInvalidRoute, err)
	}
	rt := &route{tool: t, callTool: h, schemas: schemas}
	return c.start(ctx, &c.tools, t.Name, p, rt, opts)
}

// StartResource starts a consumer serving resource r with reader rd under
// plan p. It behaves as StartTool, with resource URIs for names.
func (c *Catalog) StartResource(ctx context.Context, r Resource, p bindsec.Plan, rd ResourceReader, opts ...StartOption) (*Consumer, error) {
	if rd == nil {
		return nil, fmt.Errorf("catalog: start resource %q: %w: nil reader", r.URI, ErrInvalidRoute)
	}
	rt := &route{resource: r, read: rd}
	return c.start(ctx, &c.resources, r.URI, p, rt, opts)
}

func isJSONObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// start runs ADR-0068's start sequence.
func (c *Catalog) start(ctx context.Context, s *side, name string, p bindsec.Plan, rt *route, opts []StartOption) (*Consumer, error) {
	wrap := func(err error) error { return fmt.Errorf("catalog: start %s %q: %w", s.kind, name, err) }
	cfg := startConfig{waitingRoom: -1}
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, wrap(err)
		}
	}
	if cfg.waitingRoom >= 0 && cfg.maxConcurrent == 0 {
		return nil, wrap(fmt.Errorf("%w: a waiting room without WithMaxConcurrent", ErrInvalidConfig))
	}
	if err := s.reg.Validate(name); err != nil {
		return nil, wrap(err)
	}
	if cfg.noPlan && (p.Public || p.Roles != nil) {
		return nil, wrap(fmt.Errorf("%w: a plan given with WithoutPlan", ErrInvalidConfig))
	}
	rt.planned = !cfg.noPlan
	if rt.planned {
		if err := p.Validate(); err != nil {
			return nil, wrap(err)
		}
		// The route's own copy, which its calls are judged by (see guard):
		// a caller's later change to its slice cannot reach it. Set before
		// the entry is published, and never written again.
		rt.plan = bindsec.Plan{Public: p.Public, Roles: slices.Clone(p.Roles)}
	}

	// 1. The owner token, from ctx: cancelling ctx is the task abort.
	tok := owner.NewContext(ctx)
	ref := tok.Ref()
	rt.cat, rt.side, rt.name = c, s, name
	rt.ref, rt.release = ref, tok.Releaser()
	rt.gate.init(c.hooks)
	if cfg.maxConcurrent > 0 {
		room := cfg.waitingRoom
		if room < 0 {
			room = defaultWaitingRoom
		}
		rt.limit = &limiter{slots: make(chan struct{}, cfg.maxConcurrent), room: int64(room)}
	}
	fail := func(err error) (*Consumer, error) {
		tok.Release()
		rt.releaseFleet()
		return nil, wrap(err)
	}

	// 2. The entry, its plan in it: the duplicate guard and the cap. A
	// refused start wrote nothing, so the incumbent's entry and plan are
	// untouched, and every later cleanup is owner-conditional. The plan
	// steps ADR-0068 gives (register the plan, then re-assert it as the
	// winner) are this one step: a name cannot hold an entry without its
	// plan, nor a plan of another owner than its entry's.
	if err := s.reg.Register(name, rt, ref); err != nil {
		c.countRefusal(err)
		return fail(err)
	}
	// 3. The name fleet-wide, if a claimer is configured: a refusal
	// leaves the local entry to be removed like any other failure.
	if err := c.claim(ctx, rt); err != nil {
		c.countRefusal(err)
		s.reg.UnregisterOwned(name, ref)
		return fail(err)
	}
	// 4. The gate joins the owner's death, which from now on waits out
	// the admissions in progress; the death reclaims the route. Then ready.
	if !ref.Hold(&rt.gate) {
		s.reg.UnregisterOwned(name, ref)
		return fail(ErrDeadOwner)
	}
	ref.AfterDeath(rt.retire)
	if c.hooks != nil && c.hooks.beforeReady != nil {
		c.hooks.beforeReady(name)
	}
	if !s.reg.MarkReady(name, ref) {
		s.reg.UnregisterOwned(name, ref)
		return fail(ErrDeadOwner)
	}
	rt.readied()
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

// Stop ends the consumer gracefully: it removes the route entry, and the
// plan in it, only if it is still this consumer's, closes the route to new
// calls and waits, bounded by ctx, for the bodies already running to
// return, then kills the owner token. Once Stop
// has returned nil, no body of the route runs, and none will start, not
// even for a call that resolved the route before Stop began. It returns
// ctx's error if ctx ended the wait early; the consumer is stopped either
// way, and its running bodies can learn of it from Call.Owner. A second
// Stop is a no-op that returns nil.
//
// A route body that stops its own consumer waits, within Stop, for its own
// call to finish: call Stop from a goroutine of its own there, or give it a
// ctx that ends. A running task's body is drained like any other, bounded
// by ctx; once the consumer is dead, its tasks still working read failed.
func (k *Consumer) Stop(ctx context.Context) error {
	if !k.stopped.CompareAndSwap(false, true) {
		return nil
	}
	rt := k.rt
	if rt.side.reg.UnregisterOwned(rt.name, rt.ref) {
		rt.cat.notify()
	}
	if h := rt.cat.hooks; h != nil && h.beforeDrain != nil {
		h.beforeDrain(rt.name)
	}
	err := rt.gate.drain(ctx)
	k.tok.Release()
	rt.releaseFleet()
	return err
}

// Done returns a channel that is closed when the consumer's owner dies, by
// any path: Stop, cancellation, a panic, or being dropped.
func (k *Consumer) Done() <-chan struct{} { return k.tok.Done() }

// Owner returns the consumer's owner Ref.
func (k *Consumer) Owner() owner.Ref { return k.tok.Ref() }

// Name returns the tool name or resource URI the consumer serves.
func (k *Consumer) Name() string { return k.rt.name }
