package mcpserve

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolStateless is the MCP revision a stateless Server adds to the ones
// a stateful one speaks: server/discover instead of initialize, the
// protocol version in every request's _meta, and list_changed over
// subscriptions/listen. The SDK serves it over streamable HTTP only
// without sessions.
const ProtocolStateless = "2026-07-28"

// resolveStateless checks the options of a stateless handler
// (Options.Stateless). It refuses, with
// ErrInvalidOptions, the options that only sessions give a meaning to, so
// that a user who sets one learns at once that it does nothing:
//
//   - a positive SessionTimeout: there is no session
//     to time out;
//   - a positive MaxSessions: there is no session to count (bound the
//     long-lived requests with MaxListenStreams instead);
//   - an EventStore: stream resumption needs the GET a stateless handler
//     refuses.
//
// Negative (off) values of those options are accepted: they ask for
// nothing.
func resolveStateless(opts Options, h *mcp.StreamableHTTPOptions) error {
	if !opts.Stateless {
		return nil
	}
	switch {
	case opts.SessionTimeout > 0:
		return fmt.Errorf("%w: SessionTimeout with Stateless: a stateless server holds no sessions", ErrInvalidOptions)
	case opts.MaxSessions > 0:
		return fmt.Errorf("%w: MaxSessions with Stateless: a stateless server holds no sessions (MaxListenStreams bounds its long-lived requests)", ErrInvalidOptions)
	case h.EventStore != nil:
		return fmt.Errorf("%w: EventStore with Stateless: a stateless server resumes no streams", ErrInvalidOptions)
	}
	// No session outlives its request: the idle timer resolved from the
	// default has nothing to do.
	h.SessionTimeout = 0
	return nil
}

// sdkLogger is the logger the SDK's server gets. Every stateless HTTP
// request (a stateless server's, a stateful server's of protocol
// 2026-07-28, a call forwarded by a fleet replica) is a session of its
// own, and the SDK logs each session's lifecycle at INFO: three or four
// lines per request, which would drown everything else. And it sends each
// list_changed to every legacy session, including the request of an older
// client in flight, which has no stream to carry it, and logs a WARN for
// each. Both are what stateless serving is, not faults: those records are
// demoted to DEBUG, on every server, since any may serve such requests;
// the rest pass unchanged.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(demoteSessionLifecycle{log.Handler()})
}

// sessionLifecycle are the SDK's INFO messages about one session's
// connection and initialization.
var sessionLifecycle = map[string]bool{
	"server connecting":           true,
	"server session connected":    true,
	"server session disconnected": true,
	"session initialized":         true,
}

// demoted reports whether r is one of the records sdkLogger demotes.
func demoted(r slog.Record) bool {
	switch r.Level {
	case slog.LevelInfo:
		return sessionLifecycle[r.Message]
	case slog.LevelWarn:
		// "calling notifications/tools/list_changed: rejected by
		// transport: undelivered message: ..." for a session whose one
		// request has no stream to carry it, and "...: session is closed"
		// for one whose request was answered after the SDK took its list
		// of sessions to tell: on a stateless server both are every
		// change's normal course.
		rest, ok := strings.CutPrefix(r.Message, "calling notifications/")
		return ok && strings.Contains(rest, "list_changed: ") &&
			(strings.Contains(rest, "undelivered message") || strings.HasSuffix(rest, ": session is closed"))
	}
	return false
}

type demoteSessionLifecycle struct{ slog.Handler }

func (d demoteSessionLifecycle) Enabled(ctx context.Context, l slog.Level) bool {
	// The level is not enough to know: an INFO or WARN record may be
	// demoted, so the message decides in Handle.
	return d.Handler.Enabled(ctx, l) || d.Handler.Enabled(ctx, slog.LevelDebug)
}

func (d demoteSessionLifecycle) Handle(ctx context.Context, r slog.Record) error {
	if demoted(r) {
		if !d.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	} else if !d.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d demoteSessionLifecycle) WithAttrs(as []slog.Attr) slog.Handler {
	return demoteSessionLifecycle{d.Handler.WithAttrs(as)}
}

func (d demoteSessionLifecycle) WithGroup(name string) slog.Handler {
	return demoteSessionLifecycle{d.Handler.WithGroup(name)}
}
