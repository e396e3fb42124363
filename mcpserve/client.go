//lint:file-ignore SA1019 MCP logging, sampling and roots are deprecated as of protocol 2026-07-28 (SEP-2577) but still served during their deprecation window, and clients of earlier protocols use them.

package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// callClient is what a tool body reports to, and asks, over the request's
// session (catalog.Call.ReportProgress, Log, Sample, Elicit):
//
//   - progress becomes notifications/progress with the request's progress
//     token; a request without a token gets none, as the specification
//     asks, so Progress is nil then;
//   - log messages become notifications/message, which the SDK sends only
//     at or above the level the session set with logging/setLevel (none
//     before it set one);
//   - sampling, elicitation and roots requests (catalog.Ask,
//     catalog.Call.Sample, catalog.Call.Elicit) become
//     sampling/createMessage, elicitation/create (form mode) and
//     roots/list to the session's client, asked one after another, offered only
//     when the client declared the capability in its initialize request
//     (see offers); otherwise the functions are nil and the body gets
//     catalog.ErrNotSupported without anything being sent.
//
// All are sent on the session's connection; over streamable HTTP they
// travel on the stream of the request's response, before the result. It
// returns nil when the request has no session (the SDK always gives one).
//
// Cost: the Client and its Log function are two allocations per call, the
// Progress function one more when the request has a progress token, and
// Sample and Elicit one each when the client declared the capability;
// reading the capabilities takes the session's lock once.
func callClient(req *mcp.CallToolRequest) *catalog.Client {
	ss := req.Session
	if ss == nil {
		return nil
	}
	cl := &catalog.Client{
		Log: func(ctx context.Context, m catalog.LogMessage) error {
			return ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcpLevel(m.Level), Logger: m.Logger, Data: m.Data})
		},
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		cl.Progress = func(ctx context.Context, p catalog.Progress) error {
			return ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok, Progress: p.Progress, Total: p.Total, Message: p.Message,
			})
		}
	}
	asks(cl, ss)
	return cl
}

// askClient is what a prompt's or a reader's body asks over ss's session:
// callClient's sampling, elicitation and roots, without progress or log
// messages; nil when the session offers none of them.
func askClient(ss *mcp.ServerSession) *catalog.Client {
	if ss == nil {
		return nil
	}
	cl := &catalog.Client{}
	if !asks(cl, ss) {
		return nil
	}
	return cl
}

// asks gives cl the questions ss's client offers to answer, and reports
// whether it offers any.
func asks(cl *catalog.Client, ss *mcp.ServerSession) bool {
	sampling, elicitation, roots := offers(ss)
	if roots {
		cl.ListRoots = func(ctx context.Context) ([]catalog.Root, error) { return listRoots(ctx, ss) }
	}
	if sampling {
		cl.Sample = func(ctx context.Context, r catalog.SampleRequest) (catalog.SampleResult, error) {
			return sample(ctx, ss, r)
		}
	}
	if elicitation {
		cl.Elicit = func(ctx context.Context, r catalog.ElicitRequest) (catalog.ElicitResult, error) {
			return elicit(ctx, ss, r)
		}
	}
	return sampling || elicitation || roots
}

// mcpLevel names level as MCP does: the highest of MCP's eight levels at
// or below it (the SDK names them as slog levels), debug below them all.
func mcpLevel(level slog.Level) mcp.LoggingLevel {
	for _, l := range mcpLevels {
		if level >= l.level {
			return l.name
		}
	}
	return "debug"
}

// mcpLevels are MCP's levels, most severe first.
var mcpLevels = [...]struct {
	level slog.Level
	name  mcp.LoggingLevel
}{
	{mcp.LevelEmergency, "emergency"}, {mcp.LevelAlert, "alert"}, {mcp.LevelCritical, "critical"},
	{mcp.LevelError, "error"}, {mcp.LevelWarning, "warning"}, {mcp.LevelNotice, "notice"},
	{mcp.LevelInfo, "info"},
}

// slogLevel is the slog level of an MCP log level, the inverse of
// mcpLevel: debug for debug and for a level MCP does not name.
func slogLevel(l mcp.LoggingLevel) slog.Level {
	for _, m := range mcpLevels {
		if m.name == l {
			return m.level
		}
	}
	return mcp.LevelDebug
}

// serverRequestsEnd is the first protocol version that forbids a server's
// own requests to the client while it serves one (SEP-2322): sampling and
// elicitation travel there inside the tool's result instead, a round trip
// that re-runs the call, which a catalog body cannot express. The SDK
// refuses the requests on such sessions; offers does not offer them.
const serverRequestsEnd = "2026-07-28"

// offers reports whether ss's client takes sampling, form elicitation
// and roots requests: it declared the capability in its initialize
// request (for elicitation: form mode, or no mode, which means form), on
// a protocol that allows server requests. A stateless session has no
// declared capabilities, and its client could not answer anyway.
func offers(ss *mcp.ServerSession) (sampling, elicitation, roots bool) {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.ProtocolVersion >= serverRequestsEnd {
		return false, false, false
	}
	caps := p.Capabilities
	if e := caps.Elicitation; e != nil {
		elicitation = e.Form != nil || e.URL == nil
	}
	return caps.Sampling != nil, elicitation, caps.RootsV2 != nil
}

const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
)

// sample sends r to ss's client and waits for its completion, or for ctx.
func sample(ctx context.Context, ss *mcp.ServerSession, r catalog.SampleRequest) (catalog.SampleResult, error) {
	p, err := sampleParams(r)
	if err != nil {
		return catalog.SampleResult{}, err
	}
	res, err := ss.CreateMessage(ctx, p)
	if err != nil {
		return catalog.SampleResult{}, askError(ctx, methodCreateMessage, err)
	}
	if res.Content == nil {
		return catalog.SampleResult{}, fmt.Errorf("mcpserve: %s: the client's answer has no content", methodCreateMessage)
	}
	c, err := contentFromSDK(res.Content)
	if err != nil {
		return catalog.SampleResult{}, fmt.Errorf("mcpserve: %s: the client's answer: %w", methodCreateMessage, err)
	}
	return catalog.SampleResult{Role: catalog.Role(res.Role), Content: c, Model: res.Model, StopReason: res.StopReason}, nil
}

// sampleParams is r as MCP's sampling/createMessage params.
func sampleParams(r catalog.SampleRequest) (*mcp.CreateMessageParams, error) {
	p := &mcp.CreateMessageParams{
		MaxTokens: r.MaxTokens, SystemPrompt: r.SystemPrompt, Temperature: r.Temperature,
		StopSequences: r.StopSequences, Messages: make([]*mcp.SamplingMessage, len(r.Messages)),
	}
	for i, m := range r.Messages {
		c, err := contentToSDK(m.Content)
		if err != nil {
			return nil, fmt.Errorf("mcpserve: %s: message %d: %w", methodCreateMessage, i, err)
		}
		p.Messages[i] = &mcp.SamplingMessage{Role: mcp.Role(m.Role), Content: c}
	}
	if mp := r.Model; len(mp.Hints) > 0 || mp.CostPriority != 0 || mp.SpeedPriority != 0 || mp.IntelligencePriority != 0 {
		p.ModelPreferences = &mcp.ModelPreferences{
			CostPriority: mp.CostPriority, SpeedPriority: mp.SpeedPriority, IntelligencePriority: mp.IntelligencePriority,
		}
		for _, h := range mp.Hints {
			p.ModelPreferences.Hints = append(p.ModelPreferences.Hints, &mcp.ModelHint{Name: h})
		}
	}
	return p, nil
}

// listRoots asks ss's client for its roots and waits for them, or for ctx.
func listRoots(ctx context.Context, ss *mcp.ServerSession) ([]catalog.Root, error) {
	res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{})
	if err != nil {
		return nil, askError(ctx, methodListRoots, err)
	}
	out := make([]catalog.Root, 0, len(res.Roots))
	for _, r := range res.Roots {
		if r != nil {
			out = append(out, catalog.Root{URI: r.URI, Name: r.Name})
		}
	}
	return out, nil
}

// elicit sends r to ss's client as a form and waits for the user's answer,
// or for ctx. The SDK checks accepted values against the schema and fills
// in its defaults.
func elicit(ctx context.Context, ss *mcp.ServerSession, r catalog.ElicitRequest) (catalog.ElicitResult, error) {
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: r.Message, RequestedSchema: r.Schema})
	if err != nil {
		return catalog.ElicitResult{}, askError(ctx, methodElicit, err)
	}
	switch a := catalog.ElicitAction(res.Action); a {
	case catalog.ElicitAccept:
		return catalog.ElicitResult{Action: a, Content: res.Content}, nil
	case catalog.ElicitDecline, catalog.ElicitCancel:
		return catalog.ElicitResult{Action: a}, nil
	}
	return catalog.ElicitResult{}, fmt.Errorf("mcpserve: %s: the client answered with unknown action %q", methodElicit, quote.Cut(res.Action, 64))
}

// askError describes a failed request to the client. It wraps ctx's error
// when ctx ended first, so that the server reports the call as ended;
// otherwise it quotes the client's error at most maxErrorText bytes long,
// since the client chose it.
func askError(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("mcpserve: %s: no answer before the call ended: %w", method, ctx.Err())
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Errorf("mcpserve: %s: the client answered with error %d: %s", method, we.Code, quote.Cut(we.Message, maxErrorText))
	}
	return fmt.Errorf("mcpserve: %s: %s", method, quote.Cut(err.Error(), maxErrorText))
}

// maxErrorText is how much of a client's error text askError keeps.
const maxErrorText = 256
