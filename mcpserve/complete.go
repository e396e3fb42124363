package mcpserve

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// methodComplete is answered from the catalog: the completer of the
// prompt or template the reference names, which belongs to its consumer.
const methodComplete = "completion/complete"

// The reference types of completion/complete.
const (
	refPrompt   = "ref/prompt"
	refResource = "ref/resource"
)

func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (mcp.Result, error) {
	p := req.Params
	if p == nil || p.Ref == nil || p.Argument.Name == "" {
		return nil, invalidParams("completion/complete: a ref and an argument name are required", nil)
	}
	var given map[string]string
	if p.Context != nil {
		given = p.Context.Arguments
	}
	ctx, cred := s.credential(ctx, req)
	var (
		c    catalog.Completion
		err  error
		what string
	)
	switch p.Ref.Type {
	case refPrompt:
		what = "prompt " + quote.Name(p.Ref.Name)
		c, err = s.cat.Complete(ctx, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: p.Ref.Name, Argument: p.Argument.Name, Value: p.Argument.Value, Context: given, Credential: cred})
	case refResource:
		what = "resource template " + quote.Name(p.Ref.URI)
		c, err = s.cat.Complete(ctx, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: p.Ref.URI, Argument: p.Argument.Name, Value: p.Argument.Value, Context: given, Credential: cred})
	default:
		return nil, invalidParams(fmt.Sprintf("completion/complete: unknown ref type %s", quote.Name(p.Ref.Type)), nil)
	}
	if err != nil {
		if s.fleet != nil && errors.Is(err, catalog.ErrNotFound) && !isForwarded(req.Extra) {
			if kind, name, ok := s.completionRef(p.Ref); ok {
				if ep, ok := s.fleet.fwd.peers.Peer(kind, name); ok {
					return s.forwardComplete(ctx, ep, cred, kind, name, what, p)
				}
			}
		}
		return nil, s.completeError(ctx, what, err, isForwarded(req.Extra))
	}
	values := c.Values
	if values == nil {
		values = []string{} // never null on the wire
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: c.Total, HasMore: c.HasMore}}, nil
}

// completeError maps a completion's failure onto the wire. A route whose
// owner died, before the lookup or between it and the admission, answers
// as an unknown one; one that a completion forwarded here (forwarded
// set) names is gone, as a tool is: -32602 route_gone, retryable.
func (s *Server) completeError(ctx context.Context, what string, err error, forwarded bool) error {
	switch {
	case forwarded && (errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone)):
		return invalidParams(what+" is gone: its consumer stopped before the completion reached it",
			map[string]any{"reason": "route_gone", "retryable": true})
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		s.logAuthPanic(err, "completion/complete "+what)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "completion failed: internal error"}
	case errors.Is(err, catalog.ErrNotFound), errors.Is(err, catalog.ErrRouteGone):
		return invalidParams("unknown "+what, nil)
	case errors.Is(err, catalog.ErrInvalidArguments):
		return invalidParams(err.Error(), nil)
	case catalog.Denied(err):
		return &jsonrpc.Error{Code: CodeDenied, Message: fmt.Sprintf("%s: %s", what, denial(err))}
	case errors.Is(err, catalog.ErrRoutePanicked):
		s.log.Error("mcpserve: completer panicked; its consumer is dead", "ref", what, "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "completion failed: internal error"}
	case errors.Is(err, catalog.ErrOverloaded):
		return overloaded(what + " is overloaded; retry later")
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("completion of %s: request ended: %v", what, err)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}
