package inproc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/livereg/livereg/mcpserve"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeResourceNotFound is the spec's resource-not-found code, which an
// SDK configured for it answers instead of invalid params.
const codeResourceNotFound = -32002

// classifyMCPErr maps a prompts/get or resources/read error from mcpserve
// onto the outcomes of in-process operations: denials come back with
// mcpserve's denied code, unknown routes as invalid params or
// resource-not-found, a gone read with reason route_gone (a gone prompt
// answers as an unknown one), a panic as an internal error.
func classifyMCPErr(err error) outcome {
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	case !errors.As(err, &werr):
		return outcomeOther
	case werr.Code == mcpserve.CodeDenied:
		return outcomeDenied
	case werr.Code == mcpCodeOverloaded:
		return outcomeOverloaded
	case werr.Code == jsonrpc.CodeInvalidParams && strings.Contains(string(werr.Data), "route_gone"):
		return outcomeGone
	case werr.Code == jsonrpc.CodeInvalidParams, werr.Code == codeResourceNotFound:
		return outcomeUnknown
	case werr.Code == jsonrpc.CodeInternalError && strings.Contains(werr.Message, "internal error"):
		return outcomePanicked
	}
	return outcomeOther
}

// mcpGet is getPrompt through the MCP client, with the same checks.
func (w *world) mcpGet(ctx context.Context, d *mcpDriver, ns *nameState, cred credClass, l *latencies) outcome {
	s := callSnapshot{ns: ns, starts: ns.starts.Load()}
	s.holder = ns.holder.Load()
	s.begin = w.tick()
	t0 := time.Now()
	res, err := d.sessions[cred].GetPrompt(ctx, &mcp.GetPromptParams{Name: ns.name, Arguments: promptArgs(callArgs{Seq: s.begin, Cred: cred.String()})})
	l.Record(opMCPGet, time.Since(t0))
	o := classifyMCPErr(err)
	w.mcpOutcomes[o].Add(1)
	text := ""
	if err == nil && len(res.Messages) > 0 {
		if tc, ok := res.Messages[0].Content.(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	w.dead.callEnded(s, o)
	w.dead.oneWinner(s, o, text)
	if o == outcomeOther || o == outcomePanicked {
		w.t.Unexpected("mcp prompts/get %s: %v", ns.name, err)
	}
	return o
}

// mcpRead is readTemplate through the MCP client, with the same checks.
func (w *world) mcpRead(ctx context.Context, d *mcpDriver, g tmplGroup, item bool, cred credClass, l *latencies) outcome {
	r := w.beginTemplateRead(g, item, cred)
	uri := uriFor(r.ns, r.args)
	t0 := time.Now()
	res, err := d.sessions[cred].ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	l.Record(opMCPRead, time.Since(t0))
	o := classifyMCPErr(err)
	w.mcpOutcomes[o].Add(1)
	text := ""
	if err == nil && len(res.Contents) > 0 {
		text = res.Contents[0].Text
	}
	w.endTemplateRead(r, o, text)
	if o == outcomeOther || o == outcomePanicked {
		w.t.Unexpected("mcp resources/read %s: %v", uri, err)
	}
	return o
}
