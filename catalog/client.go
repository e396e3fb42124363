package catalog

import "context"

// Client is what a tool body can send back to whoever made the call while
// it runs: progress and log messages. A transport fills in the functions
// it can carry (package mcpserve turns them into MCP's
// notifications/progress and notifications/message); an in-process caller
// of CallTool passes its own WithClient. Each function may be nil: the
// caller does not take that kind of message.
//
// The functions are called on the body's goroutine, possibly from several
// bodies at once, so they must be safe for concurrent use; a body that
// reports from goroutines of its own must not do so after it returned.
// They should return promptly: the body waits for them.
type Client struct {
	// Progress reports how far the call has got. nil when the caller asked
	// for no progress (in MCP: the request had no progress token).
	Progress func(ctx context.Context, p Progress) error
	// Log sends a log message to the caller. The caller filters by level
	// (in MCP: the session's logging/setLevel); nil means it takes none.
	Log func(ctx context.Context, m LogMessage) error
}

// Progress is one progress report. Progress must grow from one report to
// the next; Total is 0 when unknown.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// LogLevel is a log message's severity, as MCP (RFC 5424) names them.
type LogLevel string

// The log levels, least severe first.
const (
	LevelDebug     LogLevel = "debug"
	LevelInfo      LogLevel = "info"
	LevelNotice    LogLevel = "notice"
	LevelWarning   LogLevel = "warning"
	LevelError     LogLevel = "error"
	LevelCritical  LogLevel = "critical"
	LevelAlert     LogLevel = "alert"
	LevelEmergency LogLevel = "emergency"
)

// LogMessage is one log message to the caller. Data is any value that
// encodes as JSON (a string, a map); Logger names its source and may be
// empty.
type LogMessage struct {
	Level  LogLevel
	Logger string
	Data   any
}

// clientKey is the context key of a call's Client.
type clientKey struct{}

// ClientFrom returns the Client of the call whose context ctx is (or
// derives from), or nil when its caller takes no reports.
func ClientFrom(ctx context.Context) *Client {
	cl, _ := ctx.Value(clientKey{}).(*Client)
	return cl
}

// ReportProgress reports progress to the caller, if it takes progress;
// otherwise it does nothing and returns nil. ctx must be the body's ctx or
// derive from it: the caller's Client travels there. It is as safe for
// concurrent use as the caller's Client.Progress.
func (c Call) ReportProgress(ctx context.Context, p Progress) error {
	cl := ClientFrom(ctx)
	if cl == nil || cl.Progress == nil {
		return nil
	}
	return cl.Progress(ctx, p)
}

// Log sends a log message to the caller, if it takes them; otherwise it
// does nothing and returns nil. ctx as for ReportProgress.
func (c Call) Log(ctx context.Context, level LogLevel, data any) error {
	cl := ClientFrom(ctx)
	if cl == nil || cl.Log == nil {
		return nil
	}
	return cl.Log(ctx, LogMessage{Level: level, Data: data})
}

// A CallOption configures one CallTool call. It is a small value, not a
// function, so that a call without options costs nothing.
type CallOption struct {
	client *Client
}

// WithClient gives the call's body cl to report to (see ReportProgress and
// ClientFrom): it rides in the body's ctx, at one allocation a call that
// has one. nil is a caller that takes nothing.
func WithClient(cl *Client) CallOption { return CallOption{client: cl} }
