//lint:file-ignore SA1019 MCP logging is deprecated as of protocol 2026-07-28 but still served during its deprecation window, and clients of earlier protocols use it.

package mcpserve

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// callClient is what a tool body reports to over the request's session
// (catalog.Call.ReportProgress, catalog.Call.Log):
//
//   - progress becomes notifications/progress with the request's progress
//     token; a request without a token gets none, as the specification
//     asks, so Progress is nil then;
//   - log messages become notifications/message, which the SDK sends only
//     at or above the level the session set with logging/setLevel (none
//     before it set one).
//
// Both are sent on the session's connection; over streamable HTTP they
// travel on the stream of the request's response, before the result. It
// returns nil when the request has no session (the SDK always gives one).
func callClient(req *mcp.CallToolRequest) *catalog.Client {
	ss := req.Session
	if ss == nil {
		return nil
	}
	cl := &catalog.Client{
		Log: func(ctx context.Context, m catalog.LogMessage) error {
			if !knownLevel(m.Level) {
				return fmt.Errorf("mcpserve: log level %q is not one of MCP's", m.Level)
			}
			return ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(m.Level), Logger: m.Logger, Data: m.Data})
		},
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		cl.Progress = func(ctx context.Context, p catalog.Progress) error {
			return ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok, Progress: p.Progress, Total: p.Total, Message: p.Message,
			})
		}
	}
	return cl
}

func knownLevel(l catalog.LogLevel) bool {
	switch l {
	case catalog.LevelDebug, catalog.LevelInfo, catalog.LevelNotice, catalog.LevelWarning,
		catalog.LevelError, catalog.LevelCritical, catalog.LevelAlert, catalog.LevelEmergency:
		return true
	}
	return false
}
