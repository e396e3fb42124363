package loadgen

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
)

// System is what the workload drives and the checkers probe: the subset of
// *catalog.Catalog the invariants are about. It is an interface so that
// tests can substitute deliberately broken systems and prove that every
// checker sees the bug. Errors must match the catalog's sentinels with
// errors.Is (catalog.ErrDuplicate, ErrCapReached, ErrUnknownTool,
// ErrRouteGone, ErrRoutePanicked, ErrOverloaded, and the denials that
// catalog.Denied recognises).
type System interface {
	StartTool(ctx context.Context, t catalog.Tool, p bindsec.Plan, h catalog.ToolHandler) (Consumer, error)
	CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (catalog.Result, error)
	ListTools() []catalog.Tool
	Stats() catalog.Stats
}

// Consumer is a started route's owner handle. Dropping the last reference
// to it without Stop must end it at a later garbage collection.
type Consumer interface {
	Stop(ctx context.Context) error
	Done() <-chan struct{}
	Owner() owner.Ref
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
	roleCall     = "loadgen.call"
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

// NewCatalogSystem makes the catalog a run drives, with cfg's cap and
// missing-plan mode and the loadgen's authenticator.
func NewCatalogSystem(cfg Config) (*CatalogSystem, error) {
	cat, err := catalog.New(catalog.Config{
		MaxTools:      cfg.Cap,
		MissingPlan:   cfg.MissingPlan,
		Authenticator: Authenticator(),
		// The run drops consumers on purpose, thousands of times: the
		// catalog's warning for each would drown the report.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	return &CatalogSystem{Cat: cat, MaxConcurrent: cfg.MaxConcurrent}, nil
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

// CallTool calls through the catalog's dispatch.
func (s *CatalogSystem) CallTool(ctx context.Context, name string, args json.RawMessage, credential string) (catalog.Result, error) {
	return s.Cat.CallTool(ctx, name, args, credential)
}

// ListTools lists the catalog's live, ready tools.
func (s *CatalogSystem) ListTools() []catalog.Tool { return s.Cat.ListTools() }

// Stats returns the catalog's counts.
func (s *CatalogSystem) Stats() catalog.Stats { return s.Cat.Stats() }
