package mcpserve

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/internal/quote"
)

// A route body runs on the goroutine that serves its request, and one
// that ends that goroutine with runtime.Goexit cannot be stopped: Go runs
// the deferred calls and ends the goroutine, whatever they do. The
// catalog's deferred finish kills the consumer and releases the route's
// slot (catalog.ErrRouteExited); what the client sees depends on whose
// goroutine it was:
//
//   - The fast path serves on net/http's goroutine of the connection (or
//     of the stream, over HTTP/2), whose own deferred calls close the
//     connection (reset the stream): the client gets an error at once.
//     This path's own deferred calls release the session's request
//     (trackFast) and the call's context (calls.start).
//   - The SDK serves on a goroutine of its JSON-RPC connection, which
//     would die without an answer and leave the client, and the session's
//     count of requests in flight, waiting for good. So the methods that
//     run a body are answered on a goroutine of their own (contained), and
//     a Goexit there becomes a JSON-RPC internal error for the client.
//     It costs a goroutine and a channel per such request on the SDK
//     path, which the fast path takes the commonest ones off.

// runsBody reports whether the catalog runs a consumer's code on the
// goroutine that answers method.
func runsBody(method string) bool {
	switch method {
	case methodCallTool, methodReadResource, methodGetPrompt, methodComplete:
		return true
	}
	return false
}

// contained is answer on a goroutine of its own, for the SDK's path: it
// returns answer's result, or an internal error when the goroutine ended
// with runtime.Goexit instead. As golang.org/x/sync/singleflight does, it
// tells a Goexit by a flag set once answer returned: the deferred call
// finds it unset. A panic is not recovered here (the catalog recovers a
// body's); it ends the process as it would have on the SDK's goroutine.
func (s *Server) contained(ctx context.Context, method string, req mcp.Request) (mcp.Result, error, bool) {
	type answered struct {
		res mcp.Result
		err error
		ok  bool
	}
	done := make(chan answered, 1)
	go func() {
		var normalReturn bool
		defer func() {
			if !normalReturn {
				done <- answered{nil, s.goexited(method, req), true}
			}
		}()
		res, err, ok := s.answer(ctx, method, req)
		normalReturn = true
		done <- answered{res, err, ok}
	}()
	a := <-done
	return a.res, a.err, a.ok
}

// goexited logs a request whose body ended its goroutine with
// runtime.Goexit and returns the client's error, which, as a panic's,
// says no more than that the request failed.
func (s *Server) goexited(method string, req mcp.Request) error {
	name := requestName(req)
	s.log.Error("mcpserve: a body ended its goroutine with runtime.Goexit; its consumer is dead", "method", method, "name", quote.Name(name))
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %s failed: internal error", method, quote.Name(name))}
}

// requestName is the route a request that runs a body names.
func requestName(req mcp.Request) string {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			return r.Params.Name
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			return r.Params.URI
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			return r.Params.Name
		}
	case *mcp.CompleteRequest:
		if r.Params != nil && r.Params.Ref != nil {
			return r.Params.Ref.Name + r.Params.Ref.URI
		}
	}
	return ""
}
