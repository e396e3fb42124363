package inproc

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/owner"
)

// System is what the workload drives and the checkers probe: the subset of
// *catalog.Catalog the invariants are about. It is an interface so that
// tests can substitute deliberately broken systems and prove that every
// checker sees the bug. Errors must match the catalog's sentinels with
// errors.Is (catalog.ErrDuplicate, ErrCapReached, ErrNotFound,
// ErrRouteGone, ErrRoutePanicked, ErrOverloaded, and the denials that
// catalog.Denied recognises).
type System interface {
	StartTool(ctx context.Context, t catalog.Tool, p bindsec.Plan, h catalog.ToolHandler) (Consumer, error)
	CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (catalog.Result, error)
	ListTools() []catalog.Tool
	Stats() catalog.Stats

	// Prompts and resource templates, under the same owner discipline as
	// tools. Errors as above, with catalog.ErrNotFound and
	// catalog.ErrNotFound for what resolves nothing. ReadResource is a
	// resources/read of a URI that only templates hold: the most specific
	// live template that matches it reads it.
	StartPrompt(ctx context.Context, p catalog.Prompt, pl bindsec.Plan, h catalog.PromptHandler) (Consumer, error)
	GetPrompt(ctx context.Context, name string, args map[string]string, credential string) (catalog.PromptResult, error)
	ListPrompts() []catalog.Prompt
	StartResourceTemplate(ctx context.Context, t catalog.ResourceTemplate, pl bindsec.Plan, rd catalog.ResourceReader) (Consumer, error)
	ReadResource(ctx context.Context, uri, credential string) (catalog.Contents, error)
	ListResourceTemplates() []catalog.ResourceTemplate

	// Fixed resources, read with ReadResource, and their updates: fn runs for
	// every update a resource consumer publishes (Consumer.Updated), on
	// the publisher's goroutine, until cancel is called.
	StartResource(ctx context.Context, r catalog.Resource, pl bindsec.Plan, rd catalog.ResourceReader) (Consumer, error)
	ListResources() []catalog.Resource
	OnResourceUpdated(fn func(uri string)) (cancel func())

	// Changes and Version, as the catalog's: Changes is closed at the
	// next change to a listing after the call, and Version grows with
	// every change a listing can see (invariant 10).
	Changes() <-chan struct{}
	Version() uint64
}

// Consumer is a started route's owner handle. Dropping the last reference
// to it without Stop must end it at a later garbage collection.
type Consumer interface {
	Stop(ctx context.Context) error
	Done() <-chan struct{}
	Owner() owner.Ref
	// Updated publishes an update of a fixed resource's URI to every
	// OnResourceUpdated listener, before it returns; it fails with
	// catalog.ErrDeadOwner unless the consumer lives and holds the URI.
	Updated() error
}

// CatalogSystem drives a real *catalog.Catalog.
type CatalogSystem struct {
	Cat *catalog.Catalog
	// MaxConcurrent is passed to catalog.WithMaxConcurrent for every
	// route; 0 leaves routes without a limit, the catalog's default.
	MaxConcurrent int
}

// The loadgen's credentials. The authenticator knows all but bogus; only
// valid holds the role that non-public plans require.
const (
	roleCall     = bearer.RoleCall
	tokenValid   = "lg-valid-token"
	tokenNoRole  = "lg-norole-token"
	tokenExpired = "lg-expired-token"
	tokenBogus   = "lg-bogus-token"
	subjectValid = "loadgen"
)

// Authenticator returns the authenticator every loadgen system uses: a
// static table with a valid token, one without the role, and an expired
// one.
func Authenticator() bindsec.Authenticator {
	return bindsec.NewStaticTokens(map[string]bindsec.Principal{
		tokenValid:   bindsec.NewPrincipal(subjectValid, roleCall),
		tokenNoRole:  bindsec.NewPrincipal("loadgen-norole", "loadgen.other"),
		tokenExpired: bindsec.NewPrincipal("loadgen-expired", roleCall).WithExpires(time.Unix(1, 0)),
	})
}

// The task store's bounds in a run's catalog (invariant 19).
const (
	TaskCap          = 2048
	TaskCapPerCaller = 768
	TaskResultBytes  = 64 << 10
)

// NewCatalogSystem makes the catalog a run drives, with cfg's cap and
// missing-plan mode and the loadgen's authenticator.
func NewCatalogSystem(cfg Config) (*CatalogSystem, error) {
	cat, err := catalog.New(catalog.Config{
		MaxTools:      cfg.Cap,
		MaxPrompts:    kindCap(cfg),
		MaxTemplates:  kindCap(cfg),
		MaxResources:  kindCap(cfg),
		MissingPlan:   cfg.MissingPlan,
		Authenticator: Authenticator(),
		// Tasks (invariant 18) end in a fraction of a millisecond,
		// thousands a second, and their caller reads them at once: kept
		// 500 ms, ample time for that read however the machine
		// schedules it. At full speed more are kept than these caps
		// allow, so that starts are refused at them all along and
		// invariant 19 judges the store at its bounds.
		MaxTasks: TaskCap, MaxTasksPerCaller: TaskCapPerCaller, MaxTaskResultBytes: TaskResultBytes, TaskTTL: 500 * time.Millisecond,
		// The run drops consumers on purpose, thousands of times: the
		// catalog's warning for each would drown the report.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	return &CatalogSystem{Cat: cat, MaxConcurrent: cfg.MaxConcurrent}, nil
}

func (s *CatalogSystem) options() []catalog.StartOption {
	if s.MaxConcurrent > 0 {
		return []catalog.StartOption{catalog.WithMaxConcurrent(s.MaxConcurrent)}
	}
	return nil
}

// StartPrompt starts a prompt consumer; the handle is the catalog's own,
// as StartTool's is.
func (s *CatalogSystem) StartPrompt(ctx context.Context, p catalog.Prompt, pl bindsec.Plan, h catalog.PromptHandler) (Consumer, error) {
	k, err := s.Cat.StartPrompt(ctx, p, pl, h, s.options()...)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// GetPrompt gets a prompt through the catalog's dispatch.
func (s *CatalogSystem) GetPrompt(ctx context.Context, name string, args map[string]string, credential string) (catalog.PromptResult, error) {
	return s.Cat.GetPrompt(ctx, name, args, credential)
}

// ListPrompts lists the catalog's live, ready prompts.
func (s *CatalogSystem) ListPrompts() []catalog.Prompt { return s.Cat.Prompts().List() }

// StartResourceTemplate starts a resource template consumer; the handle is
// the catalog's own.
func (s *CatalogSystem) StartResourceTemplate(ctx context.Context, t catalog.ResourceTemplate, pl bindsec.Plan, rd catalog.ResourceReader) (Consumer, error) {
	k, err := s.Cat.StartResourceTemplate(ctx, t, pl, rd, s.options()...)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// ReadResource reads a URI as resources/read does.
func (s *CatalogSystem) ReadResource(ctx context.Context, uri, credential string) (catalog.Contents, error) {
	return s.Cat.ReadResource(ctx, uri, credential)
}

// ListResourceTemplates lists the catalog's live, ready templates.
func (s *CatalogSystem) ListResourceTemplates() []catalog.ResourceTemplate {
	return s.Cat.Templates().List()
}

// StartResource starts a fixed-resource consumer; the handle is the
// catalog's own.
func (s *CatalogSystem) StartResource(ctx context.Context, r catalog.Resource, pl bindsec.Plan, rd catalog.ResourceReader) (Consumer, error) {
	k, err := s.Cat.StartResource(ctx, r, pl, rd, s.options()...)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// ListResources lists the catalog's live, ready fixed resources.
func (s *CatalogSystem) ListResources() []catalog.Resource { return s.Cat.Resources().List() }

// OnResourceUpdated registers fn as the catalog's update listener.
func (s *CatalogSystem) OnResourceUpdated(fn func(uri string)) (cancel func()) {
	return s.Cat.OnResourceUpdated(fn)
}

// StartTool starts a consumer in the catalog. The *catalog.Consumer itself
// is returned, not a wrapper, so that dropping it is exactly dropping the
// catalog's owner handle.
func (s *CatalogSystem) StartTool(ctx context.Context, t catalog.Tool, p bindsec.Plan, h catalog.ToolHandler) (Consumer, error) {
	var opts []catalog.StartOption
	if s.MaxConcurrent > 0 {
		opts = append(opts, catalog.WithMaxConcurrent(s.MaxConcurrent))
	}
	k, err := s.Cat.StartTool(ctx, t, p, h, opts...)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// StartTask starts a task through the catalog and returns its ID.
func (s *CatalogSystem) StartTask(ctx context.Context, name string, args json.RawMessage, credential string) (string, error) {
	tk, err := s.Cat.StartTask(ctx, name, args, credential)
	if err != nil {
		return "", err
	}
	return tk.ID(), nil
}

// GetTask reads a task through the catalog.
func (s *CatalogSystem) GetTask(id, credential string) (catalog.TaskInfo, error) {
	return s.Cat.GetTask(id, credential)
}

// CallToolRound calls through the catalog's dispatch as a caller that
// answers in round r.
func (s *CatalogSystem) CallToolRound(ctx context.Context, name string, args json.RawMessage, credential string, r *catalog.Round) (catalog.Result, error) {
	return s.Cat.CallTool(ctx, name, args, credential, catalog.WithClient(&catalog.Client{Round: r}))
}

// CallTool calls through the catalog's dispatch.
func (s *CatalogSystem) CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (catalog.Result, error) {
	return s.Cat.CallTool(ctx, name, args, credential)
}

// ListTools lists the catalog's live, ready tools.
func (s *CatalogSystem) ListTools() []catalog.Tool { return s.Cat.Tools().List() }

// Changes returns the catalog's change channel.
func (s *CatalogSystem) Changes() <-chan struct{} { return s.Cat.Changes() }

// Version returns the catalog's listing version.
func (s *CatalogSystem) Version() uint64 { return s.Cat.Version() }

// Stats returns the catalog's counts.
func (s *CatalogSystem) Stats() catalog.Stats { return s.Cat.Stats() }
