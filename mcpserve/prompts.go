package mcpserve

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// The prompt methods the middleware answers from the catalog.
const (
	methodListPrompts = "prompts/list"
	methodGetPrompt   = "prompts/get"
)

func (s *Server) listPrompts(req *mcp.ListPromptsRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	ps, next, err := pageOf(s, methodListPrompts, cursor, s.cat.Prompts().Page, promptToSDK)
	if err != nil {
		return nil, err
	}
	return &mcp.ListPromptsResult{Prompts: ps, NextCursor: next, Cacheable: s.listCache}, nil
}

func promptToSDK(p catalog.Prompt) *mcp.Prompt {
	out := &mcp.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, &mcp.PromptArgument{
			Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required,
		})
	}
	return out
}

func (s *Server) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil {
		return nil, invalidParams("prompts/get: missing params", nil)
	}
	ctx, cred := s.credential(ctx, req)
	rd, err := s.beginRound(methodGetPrompt, p.Name, callArgs{prompt: p.Arguments}, cred, p.Meta, p.InputResponses, p.RequestState)
	if err != nil {
		return nil, err
	}
	var opts []catalog.CallOption
	asks := askClient(req.Session)
	if cl := rd.client(asks); cl != nil {
		opts = append(opts, catalog.WithClient(cl))
	}
	res, err := s.cat.GetPrompt(ctx, p.Name, p.Arguments, cred, opts...)
	if err != nil {
		if s.fleet != nil && errors.Is(err, catalog.ErrNotFound) && !isForwarded(req.Extra) {
			if ep, ok := s.fleet.fwd.peers.Peer(catalog.KindPrompt, p.Name); ok {
				return s.forwardPrompt(ctx, ep, cred, p, asks)
			}
		}
		if ir := (*catalog.InputRequiredError)(nil); rd != nil && errors.As(err, &ir) {
			reqs, state, err := s.inputRequired(rd, ir)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %s: %v", quote.Name(p.Name), err)}
			}
			return askInput(methodGetPrompt, reqs, state), nil
		}
		if ce := (*catalog.CapabilityError)(nil); errors.As(err, &ce) && namesCurrent(p.Meta) && !declares(p.Meta, ce.Capability) {
			return nil, missingCapability(p.Name, ce.Capability)
		}
		if gone := rd.goneError("prompt", err); gone != nil && !isForwarded(req.Extra) {
			return nil, gone
		}
		return nil, s.promptError(ctx, p.Name, err, isForwarded(req.Extra))
	}
	q := quote.Name(p.Name)
	out := &mcp.GetPromptResult{Description: res.Description, Messages: make([]*mcp.PromptMessage, len(res.Messages))}
	var size int64
	for i, m := range res.Messages {
		c, err := contentToSDK(m.Content)
		if err != nil {
			s.log.Error("mcpserve: prompt returned content that cannot be sent", "prompt", q, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %s returned a message that cannot be sent", q)}
		}
		out.Messages[i] = &mcp.PromptMessage{Role: mcp.Role(m.Role), Content: c}
		size += toolResultSize(catalog.Result{Content: []catalog.Content{m.Content}})
	}
	if n, over := s.overLimit(size); over {
		return nil, s.promptTooLarge(p.Name, n, false)
	}
	return out, nil
}

// promptTooLarge is the answer to a prompts/get whose messages of n bytes
// (of more than n, with more set: a forwarded answer cut short) are over
// the limit, local or forwarded alike.
func (s *Server) promptTooLarge(name string, n int64, more bool) error {
	s.log.Warn("mcpserve: prompt over the size limit; not sent", "prompt", quote.Name(name), "bytes", n, "more", more, "limit", s.maxResult)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("prompt %s: its messages of %s exceed this server's limit of %d bytes", quote.Name(name), bytesOf(n, more), s.maxResult)}
}

// promptError maps a prompts/get failure onto the wire. A prompt whose
// owner died between the lookup and the admission answers as an unknown
// one: -32602, with nothing that tells the two apart. A prompt forwarded
// here (forwarded set) that is not here is gone, as a tool is: the
// replica that forwarded it saw this one hold it, and the caller gets the
// -32602 route_gone error, retryable, from it.
func (s *Server) promptError(ctx context.Context, name string, err error, forwarded bool) error {
	q := quote.Name(name)
	switch {
	case forwarded && (errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone)):
		return invalidParams(fmt.Sprintf("prompt %s is gone: its consumer stopped before the request reached it", q),
			map[string]any{"reason": "route_gone", "retryable": true})
	case errors.Is(err, catalog.ErrNotFound), errors.Is(err, catalog.ErrRouteGone):
		return invalidParams(fmt.Sprintf("unknown prompt %s", q), nil)
	case errors.Is(err, catalog.ErrInvalidArguments):
		return invalidParams(err.Error(), nil)
	case errors.Is(err, catalog.ErrInvalidResult):
		s.log.Error("mcpserve: prompt returned an invalid result; not sent", "prompt", q, "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %s failed: internal error", q)}
	}
	return s.rpcError(ctx, "prompt", "prompts/get", q, err)
}

// The SDK sends prompts list_changed only when its own prompt table
// changes: the notifier re-adds this sentinel, never listed or got, as it
// does the tool sentinel.
var sentinelPrompt = &mcp.Prompt{Name: "livereg.mcpserve.list_changed", Description: "internal: never listed"}

func sentinelPromptHandler(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, invalidParams("unknown prompt", nil)
}

func (s *Server) promptsChanged() {
	s.log.Debug("mcpserve: prompts changed; notifying sessions", "version", s.cat.Prompts().Version())
	s.mcp.AddPrompt(sentinelPrompt, sentinelPromptHandler)
}

// receiveSurface answers, from the catalog, the methods of prompts,
// resource templates, completions and subscriptions; ok is false for any
// other method, which goes on to the SDK. It pokes the notifier after each,
// as receive does after its own.
func (s *Server) receiveSurface(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error, ok bool) {
	switch method {
	case methodListPrompts:
		if r, ok := req.(*mcp.ListPromptsRequest); ok {
			defer s.note.poke()
			res, err = s.listPrompts(r)
			return res, err, true
		}
	case methodGetPrompt:
		if r, ok := req.(*mcp.GetPromptRequest); ok {
			defer s.note.poke()
			if isForwarded(r.Extra) {
				s.beginHop(ctx, r.Extra)
			}
			ctx, end := s.calls.start(ctx, req)
			defer end()
			res, err = s.getPrompt(ctx, r)
			return res, err, true
		}
	case methodListTemplates:
		if r, ok := req.(*mcp.ListResourceTemplatesRequest); ok {
			defer s.note.poke()
			res, err = s.listResourceTemplates(r)
			return res, err, true
		}
	case methodComplete:
		if r, ok := req.(*mcp.CompleteRequest); ok {
			defer s.note.poke()
			if isForwarded(r.Extra) {
				s.beginHop(ctx, r.Extra)
			}
			ctx, end := s.calls.start(ctx, req)
			defer end()
			res, err = s.complete(ctx, r)
			return res, err, true
		}
	case methodSubscribe:
		if r, ok := req.(*mcp.SubscribeRequest); ok {
			res, err = s.subs.subscribeChecked(ctx, method, r)
			return res, err, true
		}
	}
	return nil, nil, false
}

// startSurface wires prompts list_changed into the notifier, when the
// catalog can hold prompts, and starts the subscription table's sender.
// It runs in New, before the notifier does.
func (s *Server) startSurface() {
	if s.cat.Prompts().Enabled() {
		s.note.prompts = s.promptsChanged
	}
	s.subs.start(s.mcp)
}

// promptCapabilities advertises prompts only when the catalog can hold
// them.
func promptCapabilities(cat *catalog.Catalog) *mcp.PromptCapabilities {
	if !cat.Prompts().Enabled() {
		return nil
	}
	return &mcp.PromptCapabilities{ListChanged: true}
}

// completionCapabilities advertises completions when there can be
// something to complete: a prompt or a template.
func completionCapabilities(cat *catalog.Catalog) *mcp.CompletionCapabilities {
	if !cat.Prompts().Enabled() && !cat.Templates().Enabled() {
		return nil
	}
	return &mcp.CompletionCapabilities{}
}
