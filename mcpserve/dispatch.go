package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// The methods the middleware answers from the catalog.
const (
	methodListTools     = "tools/list"
	methodCallTool      = "tools/call"
	methodListResources = "resources/list"
	methodReadResource  = "resources/read"
	methodInitialize    = "initialize"
)

// receive is the receiving middleware: it answers the catalog's methods
// (answer) and passes everything else on to the SDK, noting for the fast
// path what a session's initialization, log level and cancellations
// change (sessionfast.go).
//
// After each of the four it pokes the notifier: a lookup or a listing (this
// one, or one a route body made meanwhile) may have reclaimed a dead
// owner's entry before the route's goroutines signal the reclaim on the
// Changes channel. The poke costs a few atomic loads.
//
// A call runs under a context that ends with the HTTP request that carried
// it, or when its session is being closed (see calls), not only when the
// SDK gets round to cancelling its own. An initialize records which
// principal created the session.
func (s *Server) receive(next mcp.MethodHandler) mcp.MethodHandler {
	s.subs.next = next
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case methodInitialize:
			s.sessionCreated(req)
		case notificationCancelled:
			s.cancelFast(req)
		}
		answer := s.answer
		if runsBody(method) {
			answer = s.contained // goexit.go
		}
		if res, err, ok := answer(ctx, method, req); ok {
			if err == nil && res != nil && currentRequest(req) {
				markComplete(res) // resulttype.go
			}
			return res, err
		}
		res, err := next(ctx, method, req)
		if err == nil && (method == notificationInitialized || method == methodSetLevel) {
			s.noteSession(method, req)
		}
		return res, err
	}
}

// answer answers the methods the catalog serves, for the middleware and
// for the fast path (fastpath.go) alike; ok is false for any other
// method, or a request of a type the SDK did not make for it.
func (s *Server) answer(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error, ok bool) {
	switch method {
	case methodCallTool:
		if r, ok := req.(*mcp.CallToolRequest); ok {
			defer s.note.poke()
			if isForwarded(r.Extra) {
				s.beginHop(ctx, r.Extra)
			}
			ctx, end := s.calls.start(ctx, req)
			defer end()
			res, err = s.callTool(ctx, r)
			return res, err, true
		}
	case methodReadResource:
		if r, ok := req.(*mcp.ReadResourceRequest); ok {
			defer s.note.poke()
			if isForwarded(r.Extra) {
				s.beginHop(ctx, r.Extra)
			}
			ctx, end := s.calls.start(ctx, req)
			defer end()
			res, err = s.readResource(ctx, r)
			return res, err, true
		}
	case methodListTools:
		if r, ok := req.(*mcp.ListToolsRequest); ok {
			defer s.note.poke()
			res, err = s.listTools(r)
			return res, err, true
		}
	case methodListResources:
		if r, ok := req.(*mcp.ListResourcesRequest); ok {
			defer s.note.poke()
			res, err = s.listResources(r)
			return res, err, true
		}
	}
	return s.receiveSurface(ctx, method, req)
}

// credential returns what req presents to the catalog's guard, and the
// context to call the catalog with: for a call forwarded here, the mark
// of the caller's credential, in a context that vouches for the
// principal the forwarding replica asserted (hopsign.go); otherwise the
// bearer token over HTTP, or what Options.TransportCredential gives on
// another transport, which a fleet replica marks (fleetCredential).
func (s *Server) credential(ctx context.Context, req mcp.Request) (context.Context, string) {
	var cred string
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if isForwarded(ex) {
			return s.forwardedCaller(ctx, ex)
		}
		cred = bearer(ex.Header)
	} else if s.cred != nil {
		cred = s.cred(ctx, req)
	}
	return s.fleetCredential(ctx, cred)
}

// fleetCredential returns, for a fleet replica, the mark of the caller's
// credential cred in a context where it authenticates as cred: tasks and
// requestStates are bound to the mark, which every replica computes
// alike, so that a task started here reads through another replica, which
// sends the mark and never the token. Without a fleet, or for no
// credential, it returns ctx and cred. It costs an HMAC and a context.
func (s *Server) fleetCredential(ctx context.Context, cred string) (context.Context, string) {
	if s.fleet == nil || cred == "" {
		return ctx, cred
	}
	m := s.fleet.sign.markCredential(cred)
	return bindsec.WithAlias(ctx, m, cred), m
}

// forwardedCaller is credential for a call forwarded here: the caller
// FleetHandler put in the request's context, found through the table of
// HTTP requests on the SDK's path. None (which FleetHandler never
// leaves) is an anonymous caller.
func (s *Server) forwardedCaller(ctx context.Context, ex *mcp.RequestExtra) (context.Context, string) {
	hc, _ := ctx.Value(hopCallerKey{}).(*hopCaller)
	if hc == nil {
		if hr, _ := s.calls.request(ex.Header); hr != nil {
			hc, _ = hr.ctx.Value(hopCallerKey{}).(*hopCaller)
		}
	}
	if hc == nil || hc.cred == "" || hc.cred != forwardedCredential(ex) {
		return ctx, ""
	}
	return bindsec.WithPrincipal(ctx, hc.cred, hc.pr), hc.cred
}

// bearer returns the token of an "Authorization: Bearer <token>" header, or
// "" when there is none or the scheme is another.
func bearer(h http.Header) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil {
		return nil, invalidParams("tools/call: missing params", nil)
	}
	ctx, cred := s.credential(ctx, req)
	cl := clientFor(ctx, req)
	rd, err := s.beginRound(methodCallTool, p.Name, callArgs{raw: p.Arguments}, cred, p.Meta, p.InputResponses, p.RequestState)
	if err != nil {
		return nil, err
	}
	opts := []catalog.CallOption{catalog.WithClient(rd.client(cl))}
	if rd != nil && declaresTasks(p.Meta) && (!isForwarded(req.Extra) || s.stampsTasks()) {
		opts = append(opts, catalog.WithTasks(), catalog.WithTaskShare(s.taskShare(ctx, req, cred))) // tasks.go, taskfront.go
	}
	res, err := s.cat.CallTool(ctx, p.Name, p.Arguments, cred, opts...)
	if err == nil && res.Task != nil {
		info := res.Task.Info()
		info.ID = s.wireTaskID(info, cred)
		return &createTaskResult{info: info, ttl: s.cat.TaskTTL()}, nil
	}
	if err != nil {
		if errors.Is(err, catalog.ErrTaskRequired) && namesCurrent(p.Meta) {
			return nil, missingTasks(fmt.Sprintf("tool %s", quote.Name(p.Name)))
		}
		if s.fleet != nil && errors.Is(err, catalog.ErrNotFound) && !isForwarded(req.Extra) {
			if ep, ok := s.fleet.fwd.peers.Peer(catalog.KindTool, p.Name); ok {
				return s.forwardTool(ctx, ep, cred, p, cl)
			}
		}
		if ir := (*catalog.InputRequiredError)(nil); rd != nil && errors.As(err, &ir) {
			reqs, state, err := s.inputRequired(rd, ir)
			if err != nil {
				return errorResult(fmt.Sprintf("tool %s: %v", quote.Name(p.Name), err)), nil
			}
			return askInput(methodCallTool, reqs, state), nil
		}
		if ce := (*catalog.CapabilityError)(nil); errors.As(err, &ce) && namesCurrent(p.Meta) && !declares(p.Meta, ce.Capability) {
			return nil, missingCapability(p.Name, ce.Capability)
		}
		if gone := rd.goneError("tool", err); gone != nil && !isForwarded(req.Extra) {
			return nil, gone
		}
		return s.toolError(ctx, p.Name, err, isForwarded(req.Extra))
	}
	out, err := toolResult(res)
	if err != nil {
		s.log.Error("mcpserve: tool returned content that cannot be sent", "tool", quote.Name(p.Name), "err", err)
		return errorResult(fmt.Sprintf("tool %s returned a result that cannot be sent: %v", quote.Name(p.Name), err)), nil
	}
	if n, over := s.overLimit(toolResultSize(res)); over {
		return s.toolTooLarge(p.Name, n, false), nil
	}
	return out, nil
}

// clientFor is the client of a call: the fast path's, when it serves the
// call, or the SDK session's.
func clientFor(ctx context.Context, req *mcp.CallToolRequest) *catalog.Client {
	if cl, ok := ctx.Value(fastClientKey{}).(*catalog.Client); ok {
		return cl
	}
	return callClient(req)
}

// toolError maps a tools/call failure onto the wire; see the package doc.
func (s *Server) toolError(ctx context.Context, name string, err error, forwarded bool) (mcp.Result, error) {
	q := quote.Name(name)
	switch {
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		s.logAuthPanic(err, "tools/call "+q)
		return errorResult(fmt.Sprintf("tool %s failed: internal error", q)), nil
	case errors.Is(err, catalog.ErrNotFound) && !forwarded:
		return nil, invalidParams(fmt.Sprintf("unknown tool %s", q), nil)
	case errors.Is(err, catalog.ErrInvalidArguments):
		// The catalog's message names the tool and cuts the validator's
		// message short; it is the client's own input that is quoted.
		return nil, invalidParams(err.Error(), nil)
	case errors.Is(err, catalog.ErrInvalidResult):
		s.log.Error("mcpserve: tool result does not match its output schema; not sent", "tool", q, "err", err)
		return errorResult(fmt.Sprintf("tool %s failed: its result does not match its output schema", q)), nil
	case errors.Is(err, catalog.ErrRouteGone), errors.Is(err, catalog.ErrNotFound):
		// An unknown tool here is one that was forwarded (see above): the
		// replica that forwarded it saw this one hold it, and its
		// consumer has gone since, which is what a local death between
		// the lookup and the admission looks like.
		return nil, invalidParams(fmt.Sprintf("tool %s is gone: its consumer stopped before the call reached it", q),
			map[string]any{"reason": "route_gone", "retryable": true})
	case catalog.Denied(err):
		return errorResult(fmt.Sprintf("tool %s: %s", q, denial(err))), nil
	case errors.Is(err, catalog.ErrRoutePanicked):
		s.log.Error("mcpserve: tool body panicked; its consumer is dead", "tool", q, "err", err)
		return errorResult(fmt.Sprintf("tool %s failed: internal error", q)), nil
	case errors.Is(err, catalog.ErrOverloaded):
		return nil, overloaded(fmt.Sprintf("tool %s is overloaded; retry later", q))
	case errors.Is(err, catalog.ErrTooManyTasks):
		return nil, overloaded(fmt.Sprintf("tool %s: too many tasks held; retry later", q))
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("tool %s: request ended: %v", q, err)}
	}
	// The handler's own error: a tool execution error the model sees.
	return errorResult(err.Error()), nil
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil {
		return nil, invalidParams("resources/read: missing params", nil)
	}
	ctx, cred := s.credential(ctx, req)
	rd, err := s.beginRound(methodReadResource, p.URI, callArgs{}, cred, p.Meta, p.InputResponses, p.RequestState)
	if err != nil {
		return nil, err
	}
	var opts []catalog.CallOption
	asks := askClient(req.Session)
	if cl := rd.client(asks); cl != nil {
		opts = append(opts, catalog.WithClient(cl))
	}
	c, err := s.cat.ReadResource(ctx, p.URI, cred, opts...)
	if err != nil {
		if s.fleet != nil && errors.Is(err, catalog.ErrNotFound) && !isForwarded(req.Extra) {
			// A fixed resource of the URI, or, by the catalog's fleet
			// rule, the template that wins it (catalog.ElsewhereError).
			kind, name := catalog.KindResource, p.URI
			if ee := (*catalog.ElsewhereError)(nil); errors.As(err, &ee) {
				kind, name = ee.Kind, ee.Name
			}
			if ep, ok := s.fleet.fwd.peers.Peer(kind, name); ok {
				return s.forwardResource(ctx, ep, cred, p, asks)
			}
		}
		if ir := (*catalog.InputRequiredError)(nil); rd != nil && errors.As(err, &ir) {
			reqs, state, err := s.inputRequired(rd, ir)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resource %s: %v", quote.Name(p.URI), err)}
			}
			return askInput(methodReadResource, reqs, state), nil
		}
		if ce := (*catalog.CapabilityError)(nil); errors.As(err, &ce) && namesCurrent(p.Meta) && !declares(p.Meta, ce.Capability) {
			return nil, missingCapability(p.URI, ce.Capability)
		}
		if gone := rd.goneError("resource", err); gone != nil && !isForwarded(req.Extra) {
			return nil, gone
		}
		return nil, s.resourceError(ctx, p.URI, err, isForwarded(req.Extra))
	}
	if n, over := s.overLimit(contentsSize(c)); over {
		return nil, s.resourceTooLarge(p.URI, n, false)
	}
	rc := resourceContents(c)
	if rc.MIMEType == "" {
		rc.MIMEType = s.resourceMIMEType(p.URI)
	}
	return &mcp.ReadResourceResult{
		Contents:  []*mcp.ResourceContents{rc},
		Cacheable: cacheHint(c.CacheTTL, c.CachePublic),
	}, nil
}

// resourceMIMEType returns the MIME type a resource was listed with.
func (s *Server) resourceMIMEType(uri string) string {
	list := s.cat.Resources().List()
	i, ok := searchResource(list, uri)
	if !ok {
		return ""
	}
	return list[i].MIMEType
}

func searchResource(list []catalog.Resource, uri string) (int, bool) {
	lo, hi := 0, len(list)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if list[m].URI < uri {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(list) && list[lo].URI == uri
}

// resourceError maps a resources/read failure onto the wire.
func (s *Server) resourceError(ctx context.Context, uri string, err error, forwarded bool) error {
	q := quote.Name(uri)
	switch {
	case errors.Is(err, catalog.ErrNotFound) && !forwarded:
		return mcp.ResourceNotFoundError(uri)
	case errors.Is(err, catalog.ErrInvalidArguments):
		// Neither quotes more than quote.Most bytes of the URI.
		return invalidParams(err.Error(), nil)
	case errors.Is(err, catalog.ErrRouteGone), errors.Is(err, catalog.ErrNotFound):
		return invalidParams(fmt.Sprintf("resource %s is gone: its consumer stopped before the read reached it", q),
			map[string]any{"uri": uri, "reason": "route_gone", "retryable": true})
	}
	return s.rpcError(ctx, "resource", "resources/read", q, err)
}

// rpcError maps the failures that every route answered by a JSON-RPC
// error (a resources/read, a prompts/get) shares: a panicking
// authenticator, a plan's denial, a body's panic, an overloaded route, a
// request that ended, and anything else the body returned. q is the
// route's quoted name.
func (s *Server) rpcError(ctx context.Context, kind, method, q string, err error) error {
	internal := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s failed: internal error", kind, q)}
	switch {
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		s.logAuthPanic(err, method+" "+q)
		return internal
	case catalog.Denied(err):
		return &jsonrpc.Error{Code: CodeDenied, Message: fmt.Sprintf("%s %s: %s", kind, q, denial(err))}
	case errors.Is(err, catalog.ErrRoutePanicked):
		s.log.Error("mcpserve: "+kind+" body panicked; its consumer is dead", kind, q, "err", err)
		return internal
	case errors.Is(err, catalog.ErrOverloaded):
		return overloaded(fmt.Sprintf("%s %s is overloaded; retry later", kind, q))
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s: request ended: %v", kind, q, err)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// denial says why a plan refused a request, in words of this package's
// own: never the credential, nor whatever the authenticator's error says.
func denial(err error) string {
	switch {
	case errors.Is(err, bindsec.ErrExpired):
		return "access denied: the credential has expired"
	case errors.Is(err, bindsec.ErrForbidden):
		return "access denied: the credential lacks a role this route requires"
	case errors.Is(err, bindsec.ErrNoPlan):
		return "access denied: the route has no security plan"
	}
	return "access denied: a valid bearer credential is required (none was presented, or it was not recognised)"
}

func (s *Server) listTools(req *mcp.ListToolsRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	tools, next, err := pageOf(s, methodListTools, cursor, s.cat.Tools().Page, toolToSDK)
	if err != nil {
		return nil, err
	}
	return &mcp.ListToolsResult{Tools: tools, NextCursor: next, Cacheable: s.listCache}, nil
}

func (s *Server) listResources(req *mcp.ListResourcesRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	rs, next, err := pageOf(s, methodListResources, cursor, s.cat.Resources().Page, func(r catalog.Resource) *mcp.Resource {
		return &mcp.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType}
	})
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourcesResult{Resources: rs, NextCursor: next, Cacheable: s.listCache}, nil
}

// pageOf serves one page of a listing: the items after cursor, converted
// for the SDK, and the next cursor. A cursor the catalog did not make is
// -32602.
func pageOf[T, S any](s *Server, method, cursor string, page func(string, int) ([]T, string, error), conv func(T) S) ([]S, string, error) {
	items, next, err := page(cursor, s.page)
	if err != nil {
		return nil, "", invalidParams(method+": invalid cursor", nil)
	}
	out := make([]S, len(items))
	for i, it := range items {
		out[i] = conv(it)
	}
	return out, next, nil
}

// cacheHint is the caching hint of a result a client may keep for ttl
// (whole milliseconds), the same for every caller if public.
func cacheHint(ttl time.Duration, public bool) mcp.Cacheable {
	c := mcp.Cacheable{TTLMs: int(max(ttl, 0) / time.Millisecond), CacheScope: "private"}
	if public {
		c.CacheScope = "public"
	}
	return c
}

func toolToSDK(t catalog.Tool) *mcp.Tool {
	out := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema}
	if len(t.OutputSchema) > 0 {
		out.OutputSchema = t.OutputSchema
	}
	return out
}

func invalidParams(msg string, data map[string]any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg, Data: marshalData(data)}
}

// missingCapability is SEP-2575's answer to a 2026-07-28 request whose
// body needed a capability (catalog.CapabilityError) that the request's
// _meta did not declare: -32021, HTTP 400, naming the capability as a
// ClientCapabilities object. A 2025 client, which declared its
// capabilities once at initialize, gets the body's error as a tool error.
func missingCapability(tool, capability string) error {
	return &jsonrpc.Error{Code: codeMissingClientCapabilities,
		Message: fmt.Sprintf("tool %s needs the client's %s capability, which the request did not declare", quote.Name(tool), capability),
		Data:    marshalData(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})}
}

// declares reports whether a 2026-07-28 request's _meta declares the
// client capability named c. A client that declared it and still gets
// catalog.CapabilityError met a path that cannot carry the request (an
// input round, which this server does not yet ask for): a tool error, not
// a claim that it declared nothing.
func declares(meta mcp.Meta, c string) bool {
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	_, ok := caps[c]
	return ok
}

func overloaded(msg string) error {
	return &jsonrpc.Error{Code: CodeOverloaded, Message: msg,
		Data: marshalData(map[string]any{"reason": "overloaded", "retryable": true})}
}

func marshalData(data map[string]any) json.RawMessage {
	if data == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil
	}
	return b
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
