package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/mcpserve"
)

// mcpDriver drives tools/call and tools/list through the official MCP SDK
// client over streamable HTTP: against an in-process mcpserve server on a
// loopback port that serves the run's own catalog, or against a running
// server at a loopback URL (-target). With protocol set its clients ask
// for that revision and refuse to run on another; ProtocolCurrent serves
// the in-process server stateless.
type mcpDriver struct {
	cat      *catalog.Catalog // served in-process; nil with a target
	target   string
	protocol string // Config.Protocol
	// asks: a quarter of the clients' calls have the body ask them first
	// (invariant 17). Not on 2025-11-25 sessions, which elicitation would
	// keep off the server's fast path, nor against a target.
	asks bool

	srv      *mcpserve.Server
	hs       *http.Server
	serving  chan struct{} // closed when hs.Serve returned
	tr       *http.Transport
	sessions [numCreds]*mcp.ClientSession // one per credential class

	targetTools atomic.Pointer[[]string] // the target's tool names, from its last listing

	// noted, if set, is told of each tools/list_changed by the index of the
	// session it arrived on (invariant 10). Only an in-process server's
	// notifications are followed: a target's consumers are not the run's.
	noted func(session int)
	// mute, if set, drops the notifications for which it returns true, as
	// if the server had never sent them: a test seam.
	mute func(session int) bool
}

// mcpCodeOverloaded is mcpserve's JSON-RPC code for a full route queue.
const mcpCodeOverloaded = -32029

// notifyWindow is the list_changed coalescing window the served catalog
// runs with, which the notification checks allow for.
const notifyWindow = 50 * time.Millisecond

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// start serves the catalog (unless there is a target) and connects one
// client session per credential class.
func (d *mcpDriver) start(ctx context.Context) error {
	endpoint := d.target
	d.asks = d.cat != nil && d.protocol != ProtocolLegacy
	if d.cat != nil {
		srv, err := mcpserve.New(d.cat, mcpserve.Options{Name: "loadgen", Logger: discardLogger, Stateless: d.stateless(), NotifyWindow: notifyWindow})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			srv.Close()
			return err
		}
		d.srv = srv
		d.hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(discardLogger.Handler(), slog.LevelError)}
		d.serving = make(chan struct{})
		go func() { defer close(d.serving); _ = d.hs.Serve(ln) }()
		endpoint = "http://" + ln.Addr().String() + "/mcp"
	}
	d.tr = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	for c := range numCreds {
		// One client per session, so that a notification's handler knows
		// which session it arrived on.
		opts := &mcp.ClientOptions{Logger: discardLogger}
		if d.asks {
			// Answers a body's question by naming the asker its message
			// names (invariant 17).
			opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"asker": r.Params.Message}}, nil
			}
		}
		if d.noted != nil {
			opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
				if d.mute == nil || !d.mute(int(c)) {
					d.noted(int(c))
				}
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "livereg-loadgen", Version: "dev"}, opts)
		var so *mcp.ClientSessionOptions
		if d.protocol != "" {
			so = &mcp.ClientSessionOptions{ProtocolVersion: d.protocol}
		}
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   endpoint,
			HTTPClient: &http.Client{Transport: bearer.Transport{Next: d.tr, Token: c.token()}},
			// A legacy session's standalone stream carries list_changed
			// (a current one's subscriptions/listen, which the client
			// opens when it has a handler); without a checker for them,
			// requests and responses only.
			DisableStandaloneSSE: d.noted == nil || d.stateless(),
		}, so)
		if err != nil {
			d.close()
			return fmt.Errorf("mcp: connect to %s: %w", endpoint, err)
		}
		d.sessions[c] = cs
		// The SDK falls back to an older revision when the server does
		// not offer the one asked for; a run that asked must not pass
		// on another.
		if got := cs.InitializeResult().ProtocolVersion; d.protocol != "" && got != d.protocol {
			d.close()
			return fmt.Errorf("mcp: %s speaks MCP %s, not the %s asked for", endpoint, got, d.protocol)
		}
	}
	return nil
}

// close ends the sessions, the server and every connection, so that the
// end-of-run goroutine check sees none of them.
func (d *mcpDriver) close() {
	for i, cs := range d.sessions {
		if cs != nil {
			_ = cs.Close()
			d.sessions[i] = nil
		}
	}
	if d.srv != nil {
		_ = d.srv.Close()
	}
	if d.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if d.hs.Shutdown(ctx) != nil {
			_ = d.hs.Close()
		}
		cancel()
		<-d.serving
	}
	if d.tr != nil {
		d.tr.CloseIdleConnections()
	}
}

// stateless reports whether the clients speak the revision without
// sessions, which the in-process server then serves.
func (d *mcpDriver) stateless() bool { return d.protocol == ProtocolCurrent }

// endpointName says what the report calls the server, and the revision
// asked for.
func (d *mcpDriver) endpointName() string {
	name := "in-process mcpserve on loopback"
	if d.target != "" {
		name = d.target
	}
	switch {
	case d.stateless() && d.target == "":
		name += ", stateless, MCP " + d.protocol
	case d.protocol != "":
		name += ", MCP " + d.protocol
	}
	return name
}

// classifyMCP maps a tools/call answer from mcpserve onto the outcomes of
// in-process calls: denials and panics come back as tool error results,
// unknown and gone routes as JSON-RPC invalid-params errors, a full queue
// as mcpserve's overloaded code.
func classifyMCP(res *mcp.CallToolResult, err error) outcome {
	var werr *jsonrpc.Error
	switch {
	case err == nil && res != nil && res.IsError:
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		switch {
		case strings.Contains(text, "access denied"):
			return outcomeDenied
		case strings.Contains(text, "internal error"):
			return outcomePanicked
		}
		return outcomeToolError
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	case errors.As(err, &werr) && werr.Code == jsonrpc.CodeInvalidParams:
		if strings.Contains(string(werr.Data), "route_gone") {
			return outcomeGone
		}
		return outcomeUnknown
	case errors.As(err, &werr) && werr.Code == mcpCodeOverloaded:
		return outcomeOverloaded
	}
	return outcomeOther
}

// mcpResolver is resolver through the MCP client.
func (w *world) mcpResolver(ctx context.Context, rs *runState, d *mcpDriver, index int, l *latencies) {
	rng := newRand(w.cfg.Seed, streamMCP, index)
	m := w.cfg.Mix
	for !rs.stopping.Load() {
		if w.cfg.Ops > 0 && rs.ops.Add(1) > w.cfg.Ops {
			rs.finish("ops")
			return
		}
		// A target's prompts and templates are not the loadgen's: against
		// it, only tools are called.
		get, read := m.Get, m.Read
		if d.target != "" {
			get, read = 0, 0
		}
		n := rng.IntN(m.Call + get + read + m.List)
		if n >= m.Call+get+read {
			w.mcpList(ctx, d, l)
			continue
		}
		cred := credValid
		if rng.IntN(100) < m.BadCred {
			cred = credClass(1 + rng.IntN(int(numCreds)-1))
		}
		switch {
		case d.target != "":
			w.mcpCallTarget(ctx, d, rng, cred, l)
		case n < m.Call:
			w.mcpCall(ctx, d, w.names[rng.IntN(len(w.names))], cred, l)
		case n < m.Call+get:
			w.mcpGet(ctx, d, w.prompts[rng.IntN(len(w.prompts))], cred, l)
		default:
			w.mcpRead(ctx, d, w.groups[rng.IntN(len(w.groups))], rng.IntN(2) == 0, cred, l)
		}
	}
}

// mcpCall is call through the MCP client, with the same checks: the route
// body checks invariants 1 and 3 from the arguments, whatever the path.
func (w *world) mcpCall(ctx context.Context, d *mcpDriver, ns *nameState, cred credClass, l *latencies) outcome {
	s := callSnapshot{ns: ns, starts: ns.starts.Load()}
	s.holder = ns.holder.Load()
	s.begin = w.tick()
	args := encodeArgs(s.begin, cred, 0, 0)
	if d.asks && s.begin%4 == 0 {
		args = withAsk(args) // invariant 17
	}
	t0 := time.Now()
	res, err := d.sessions[cred].CallTool(ctx, &mcp.CallToolParams{Name: ns.name, Arguments: json.RawMessage(args)})
	l.Record(opMCPCall, time.Since(t0))
	o := classifyMCP(res, err)
	w.mcpOutcomes[o].Add(1)
	w.dead.callEnded(s, o)
	if o == outcomeOther || o == outcomePanicked || o == outcomeToolError {
		w.t.Unexpected("mcp call %s: %v", ns.name, mcpErrText(res, err))
	}
	return o
}

// mcpCallTarget calls a tool the target listed. The target's consumers are
// not the loadgen's, so there is nothing to check the answer against; it
// measures latency and counts outcomes.
func (w *world) mcpCallTarget(ctx context.Context, d *mcpDriver, rng *rand.Rand, cred credClass, l *latencies) {
	names := d.targetTools.Load()
	if names == nil || len(*names) == 0 {
		w.mcpList(ctx, d, l)
		if names = d.targetTools.Load(); names == nil || len(*names) == 0 {
			time.Sleep(10 * time.Millisecond) // nothing to call yet
			return
		}
	}
	name := (*names)[rng.IntN(len(*names))]
	t0 := time.Now()
	res, err := d.sessions[cred].CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	l.Record(opMCPCall, time.Since(t0))
	o := classifyMCP(res, err)
	w.mcpOutcomes[o].Add(1)
	if o == outcomeOther {
		w.t.Unexpected("mcp call %s on the target: %v", name, mcpErrText(res, err))
	}
}

// mcpList walks every page of tools/list and checks the listing as a
// whole against the clock reading taken before its first page.
func (w *world) mcpList(ctx context.Context, d *mcpDriver, l *latencies) {
	begin := w.tick()
	t0 := time.Now()
	tools, err := d.listAll(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.t.Unexpected("mcp tools/list: %v", err)
		}
		return
	}
	l.Record(opMCPList, time.Since(t0))
	if d.target != "" {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		d.targetTools.Store(&names)
		return
	}
	if n := w.dead.listed(begin, tools); n > 0 {
		w.unchecked.Add(int64(n))
	}
}

// listAll walks every page of tools/list on the session with valid
// credentials.
func (d *mcpDriver) listAll(ctx context.Context) ([]catalog.Tool, error) {
	var tools []catalog.Tool
	cursor := ""
	for {
		res, err := d.sessions[credValid].ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			tools = append(tools, catalog.Tool{Name: t.Name, Title: t.Title})
		}
		if cursor = res.NextCursor; cursor == "" {
			return tools, nil
		}
	}
}

func mcpErrText(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return err.Error()
	}
	if res != nil && len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return "tool error: " + tc.Text
		}
	}
	return "tool error"
}
