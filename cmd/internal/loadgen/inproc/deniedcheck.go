package inproc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// Invariant 20, denied_heard: no update, and no task result, reaches a
// principal whose read would be denied. It runs beside the load on a
// catalog and an mcpserve server of its own, with the loadgen's
// credentials, so that its routes count against none of the run's caps
// and its updates reach none of the run's listeners:
//
//   - "lg://denied/admin" and "lg://denied/late" need the call role, and
//     "lg://denied/open" is public; a consumer serves each, and the admin
//     one is restarted all along, so that subscriptions live through
//     changes of owner. tool "lg-denied-task" runs as a task and needs
//     the role.
//   - The norole principal (authenticated, without the role), with a
//     2025-11-25 session (resources/subscribe) and a 2026-07-28 one
//     (subscriptions/listen), subscribes to the admin URI and reads it,
//     over and over; it starts tasks of the tool, and reads the valid
//     credential's tasks by their IDs.
//   - A principal that holds the role until deniedShortLife after it
//     subscribes to the late URI; the late URI is updated only after
//     that expiry.
//   - The valid credential's session subscribes to every URI: it is the
//     control that shows updates flow.
//
// Every update of the admin URI that the norole sessions hear, every
// update of the late URI that the expired principal hears, a subscribe
// or read of the norole sessions that is admitted, and a task result
// that the norole credential reads are violations. Each is sound without
// timing: the norole principal is never admitted by the admin URI's plan,
// whoever holds it, and nothing of the late URI is published before the
// expiry.
const (
	deniedAdmin      = "lg://denied/admin"
	deniedLate       = "lg://denied/late"
	deniedOpen       = "lg://denied/open"
	deniedTask       = "lg-denied-task"
	tokenShort       = "lg-short-token"
	deniedShortLife  = 300 * time.Millisecond
	deniedRestartGap = 50 // iterations between restarts of the admin URI's consumer
)

type deniedChecker struct {
	t      *tally
	cat    *catalog.Catalog
	srv    *mcpserve.Server
	mu     sync.Mutex
	tokens map[*mcp.ServerSession]string
	// expiry is the short principal's, set just before it subscribes,
	// so that a slow start of the run cannot expire it first.
	expiry atomic.Pointer[time.Time]

	heardOpen atomic.Int64 // updates the control heard: the check is not vacuous
}

// newDeniedChecker builds the checker's catalog, routes and server.
func newDeniedChecker(t *tally) (*deniedChecker, error) {
	d := &deniedChecker{t: t, tokens: map[*mcp.ServerSession]string{}}
	never := time.Time{}
	d.expiry.Store(&never)
	auth := &shortAuth{d: d, static: bindsec.NewStaticTokens(map[string]bindsec.Principal{
		tokenValid:  bindsec.NewPrincipal(subjectValid, roleCall),
		tokenNoRole: bindsec.NewPrincipal("loadgen-norole", "loadgen.other"),
	})}
	var err error
	if d.cat, err = catalog.New(catalog.Config{Authenticator: auth, Logger: discardLogger}); err != nil {
		return nil, err
	}
	d.srv, err = mcpserve.New(d.cat, mcpserve.Options{Name: "loadgen-denied", Logger: discardLogger,
		TransportCredential: func(_ context.Context, req mcp.Request) string {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.tokens[ss]
		}})
	return d, err
}

// shortAuth is the loadgen's authenticator with the short principal,
// which expires at the checker's expiry.
type shortAuth struct {
	d      *deniedChecker
	static bindsec.Authenticator
}

func (a *shortAuth) Authenticate(ctx context.Context, cred string) (bindsec.Principal, error) {
	if cred == tokenShort {
		return bindsec.NewPrincipal("loadgen-short", roleCall).WithExpires(*a.d.expiry.Load()), nil
	}
	return a.static.Authenticate(ctx, cred)
}

// expired reports whether the short principal has expired by now.
func (d *deniedChecker) expired() bool {
	e := *d.expiry.Load()
	return !e.IsZero() && time.Now().After(e)
}

func (d *deniedChecker) startResource(ctx context.Context, uri string, p bindsec.Plan) (*catalog.Consumer, error) {
	return d.cat.StartResource(ctx, catalog.Resource{URI: uri}, p,
		func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{Text: uri}, nil })
}

// connect opens a session presenting token; heard runs for each update.
func (d *deniedChecker) connect(ctx context.Context, token, version string, heard func(uri string)) (*mcp.ClientSession, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := d.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.tokens[ss] = token
	d.mu.Unlock()
	cl := mcp.NewClient(&mcp.Implementation{Name: "loadgen-denied", Version: "1"}, &mcp.ClientOptions{Logger: discardLogger,
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { heard(r.Params.URI) }})
	return cl.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// loop runs the checker until ctx ends; errors that no correct server
// produces are counted as unexpected.
func (d *deniedChecker) loop(ctx context.Context) {
	defer func() { _ = d.srv.Close() }()
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	admin, err := d.startResource(rctx, deniedAdmin, bindsec.Plan{Roles: []string{roleCall}})
	if err != nil {
		d.t.Unexpected("denied_heard: start %s: %v", deniedAdmin, err)
		return
	}
	late, err1 := d.startResource(rctx, deniedLate, bindsec.Plan{Roles: []string{roleCall}})
	open, err2 := d.startResource(rctx, deniedOpen, bindsec.Plan{Public: true})
	_, err3 := d.cat.StartTool(rctx, catalog.Tool{Name: deniedTask, TaskSupport: catalog.TaskOptional}, bindsec.Plan{Roles: []string{roleCall}},
		func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("secret"), nil })
	if err := errors.Join(err1, err2, err3); err != nil {
		d.t.Unexpected("denied_heard: start the routes: %v", err)
		return
	}
	noroleHeard := func(uri string) {
		if uri == deniedAdmin || uri == deniedLate {
			d.t.Violate(InvDeniedHeard, "an update of %s reached the norole principal, whose read is denied", uri)
		}
	}
	shortHeard := func(uri string) {
		if uri == deniedLate {
			d.t.Violate(InvDeniedHeard, "an update of %s, published after its subscriber expired, reached it", uri)
		}
	}
	control := func(uri string) {
		if uri == deniedOpen {
			d.heardOpen.Add(1)
		}
	}
	legacy, err1 := d.connect(rctx, tokenNoRole, "2025-11-25", noroleHeard)
	current, err2 := d.connect(rctx, tokenNoRole, mcpserve.ProtocolStateless, noroleHeard)
	short, err3 := d.connect(rctx, tokenShort, "2025-11-25", shortHeard)
	valid, err4 := d.connect(rctx, tokenValid, "2025-11-25", control)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		d.t.Unexpected("denied_heard: connect: %v", err)
		return
	}
	for _, c := range []*mcp.ClientSession{legacy, current, short, valid} {
		defer c.Close()
	}
	expiry := time.Now().Add(deniedShortLife)
	d.expiry.Store(&expiry)
	for _, sub := range []struct {
		c   *mcp.ClientSession
		uri string
	}{{short, deniedLate}, {valid, deniedAdmin}, {valid, deniedLate}, {valid, deniedOpen}, {current, deniedAdmin}, {current, deniedLate}} {
		if err := sub.c.Subscribe(rctx, &mcp.SubscribeParams{URI: sub.uri}); err != nil {
			d.t.Unexpected("denied_heard: subscribe to %s: %v", sub.uri, err)
			return
		}
	}
	i := 0
	for ; ctx.Err() == nil; i++ {
		d.probe(rctx, legacy)
		if d.expired() {
			_ = late.Updated()
		}
		_ = admin.Updated()
		_ = open.Updated()
		if i%deniedRestartGap == deniedRestartGap-1 {
			// A new owner: the grants are judged again by its plan.
			_ = admin.Stop(rctx)
			if admin, err = d.startResource(rctx, deniedAdmin, bindsec.Plan{Roles: []string{roleCall}}); err != nil {
				d.t.Unexpected("denied_heard: restart %s: %v", deniedAdmin, err)
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	if i >= 100 && d.heardOpen.Load() == 0 {
		d.t.Unexpected("denied_heard: the control session heard no update: the check judged nothing")
	}
}

// probe has the norole principal subscribe to the admin URI, read it,
// start a task of the admin-only tool and read one of the valid
// credential's: each must be refused.
func (d *deniedChecker) probe(ctx context.Context, c *mcp.ClientSession) {
	d.t.Check(InvDeniedHeard, 4)
	if err := c.Subscribe(ctx, &mcp.SubscribeParams{URI: deniedAdmin}); !denied(err) {
		d.t.Violate(InvDeniedHeard, "the norole principal's resources/subscribe to %s was not denied: %v", deniedAdmin, err)
	}
	if _, err := c.ReadResource(ctx, &mcp.ReadResourceParams{URI: deniedAdmin}); !denied(err) {
		d.t.Violate(InvDeniedHeard, "the norole principal's read of %s was not denied: %v", deniedAdmin, err)
	}
	if tk, err := d.cat.StartTask(ctx, deniedTask, nil, tokenNoRole); err == nil {
		if info, err := d.cat.GetTask(tk.ID(), tokenNoRole); err == nil {
			d.t.Violate(InvDeniedHeard, "the norole principal started task %s of %s and read it (%s)", tk.ID(), deniedTask, info.Status)
		}
	}
	tk, err := d.cat.StartTask(ctx, deniedTask, nil, tokenValid)
	if err != nil {
		return // at the task caps: nothing to read
	}
	if _, err := tk.Wait(ctx); err != nil {
		return
	}
	if info, err := d.cat.GetTask(tk.ID(), tokenNoRole); err == nil {
		d.t.Violate(InvDeniedHeard, "the norole principal read task %s of the valid credential (%s)", tk.ID(), info.Status)
	}
}

// denied reports whether err is the plan's refusal on the wire.
func denied(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == mcpserve.CodeDenied
}
