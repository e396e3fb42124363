package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// Prompts, templated reads and completions cross the fleet's hop as tools
// do (forward.go): a request for a prompt, or a completion for a prompt
// or template, that another replica holds goes to that replica's fleet
// endpoint, at protocol 2026-07-28, with the caller's credential; the
// holder serves it from its own catalog and its answer, or its error,
// comes back as it sent it. A templated read is a resources/read, and
// goes as one (readResource in dispatch.go): the catalog's fleet rule
// names the template that wins the URI (catalog.ElsewhereError), and its
// holder reads it.

// promptGet is the hop request of a prompts/get whose caller, if a
// 2025-11-25 session, is cl.
func promptGet(p *mcp.GetPromptParams, cl *catalog.Client) hopRequest {
	r := hopRequest{method: methodGetPrompt, name: p.Name}
	r.fields = fields(struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments,omitempty"`
	}{p.Name, p.Arguments})
	r.setRound(p.Meta, cl, p.InputResponses, p.RequestState, false)
	return r
}

// completion is the hop request of a completion/complete of what (the
// prompt or template its ref names, for the log).
func completion(p *mcp.CompleteParams, what string) hopRequest {
	r := hopRequest{method: methodComplete, name: what}
	r.fields = fields(struct {
		Ref      *mcp.CompleteReference     `json:"ref"`
		Argument mcp.CompleteParamsArgument `json:"argument"`
		Context  *mcp.CompleteContext       `json:"context,omitempty"`
	}{p.Ref, p.Argument, p.Context})
	r.setRound(p.Meta, nil, nil, "", false)
	return r
}

// fields encodes v, a struct of params decoded from JSON (so it
// encodes), without its braces.
func fields(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 {
		return nil
	}
	return b[1 : len(b)-1]
}

// getPrompt forwards a prompts/get like readResource.
func (f *forwarder) getPrompt(ctx context.Context, endpoint, cred string, p *mcp.GetPromptParams, cl *catalog.Client) (*mcp.GetPromptResult, error) {
	res := new(mcp.GetPromptResult)
	if err := f.forward(ctx, endpoint, cred, catalog.KindPrompt, p.Name, promptGet(p, cl), nil, res); err != nil {
		return nil, err
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// complete forwards a completion/complete of what, of kind and name as
// the fleet's claims have it.
func (f *forwarder) complete(ctx context.Context, endpoint, cred string, kind catalog.Kind, name, what string, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	res := new(mcp.CompleteResult)
	if err := f.forward(ctx, endpoint, cred, kind, name, completion(p, what), nil, res); err != nil {
		return nil, err
	}
	delete(res.Meta, mcp.MetaKeyServerInfo)
	return res, nil
}

// forwardPrompt is forwardResource for a prompts/get: the holder's
// questions are asked of a 2025-11-25 session here, round after round,
// and its messages count against the result limit as a local prompt's.
func (s *Server) forwardPrompt(ctx context.Context, endpoint, cred string, p *mcp.GetPromptParams, cl *catalog.Client) (mcp.Result, error) {
	res, err := s.fleet.fwd.getPrompt(ctx, endpoint, cred, p, cl)
	for n := 0; err == nil && res.InputRequests != nil && !namesCurrent(p.Meta); n++ {
		if n == maxForwardRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %s asked for input more than %d times; given up", quote.Name(p.Name), maxForwardRounds)}
		}
		responses, aerr := askOnBehalf(ctx, cl, res.InputRequests)
		if aerr != nil {
			return nil, s.promptError(ctx, p.Name, aerr, false)
		}
		retry := *p
		retry.InputResponses, retry.RequestState = responses, res.RequestState
		res, err = s.fleet.fwd.getPrompt(ctx, endpoint, cred, &retry, cl)
	}
	var big *resultTooLarge
	switch {
	case errors.Is(err, errSelf):
		return nil, s.promptError(ctx, p.Name, catalog.ErrRouteGone, true)
	case errors.As(err, &big):
		return nil, s.promptTooLarge(p.Name, big.n, true)
	case err != nil:
		return nil, err
	}
	var size int64
	for _, m := range res.Messages {
		if m != nil {
			size += sdkToolResultSize(&mcp.CallToolResult{Content: []mcp.Content{m.Content}})
		}
	}
	if n, over := s.overLimit(size); over {
		return nil, s.promptTooLarge(p.Name, n, false)
	}
	return res, nil
}

// forwardComplete forwards a completion/complete of what to the replica
// at endpoint.
func (s *Server) forwardComplete(ctx context.Context, endpoint, cred string, kind catalog.Kind, name, what string, p *mcp.CompleteParams) (mcp.Result, error) {
	res, err := s.fleet.fwd.complete(ctx, endpoint, cred, kind, name, what, p)
	var big *resultTooLarge
	switch {
	case errors.Is(err, errSelf):
		return nil, s.completeError(ctx, what, catalog.ErrRouteGone, true)
	case errors.As(err, &big):
		s.log.Warn("mcpserve: a forwarded completion over the size limit; not sent", "ref", what, "bytes", big.n)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("completion of %s: its answer exceeds this server's limit of %d bytes", what, s.maxResult)}
	case err != nil:
		return nil, err
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{} // never null on the wire
	}
	return res, nil
}

// completionRef is the route a completion's ref names as the fleet's
// claims name it, for Peers: a prompt by its name, a template by its key
// (catalog.TemplateKey). A template ref must be a template the catalog's
// listing, the fleet's, holds under that very URI template, as a local
// completion requires: one listed under other variable names is unknown
// here, and would be on its holder.
func (s *Server) completionRef(ref *mcp.CompleteReference) (kind catalog.Kind, name string, ok bool) {
	switch ref.Type {
	case refPrompt:
		return catalog.KindPrompt, ref.Name, true
	case refResource:
		key, err := catalog.TemplateKey(ref.URI)
		if err != nil || !slices.ContainsFunc(s.cat.Templates().List(), func(t catalog.ResourceTemplate) bool { return t.URITemplate == ref.URI }) {
			return "", "", false
		}
		return catalog.KindTemplate, key, true
	}
	return "", "", false
}
