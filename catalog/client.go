package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/livereg/livereg/internal/quote"
)

// Client is what a tool body can send back to whoever made the call while
// it runs: progress and log messages, and requests for an LLM completion
// or for the user's input. A transport fills in the functions it can carry
// (package mcpserve turns them into MCP's notifications/progress,
// notifications/message, sampling/createMessage and elicitation/create);
// an in-process caller of CallTool passes its own WithClient. Each
// function may be nil: the caller does not take that kind of message, or
// cannot answer that kind of request.
//
// The functions are called on the body's goroutine, possibly from several
// bodies at once, so they must be safe for concurrent use; a body that
// reports from goroutines of its own must not do so after it returned.
// Progress and Log should return promptly: the body waits for them. Sample
// and Elicit wait for an answer, which may take a person's time, and must
// return once their ctx ends, with an error that wraps ctx.Err().
type Client struct {
	// Progress reports how far the call has got. nil when the caller asked
	// for no progress (in MCP: the request had no progress token).
	Progress func(ctx context.Context, p Progress) error
	// Log sends a log message to the caller. The caller filters by level
	// (in MCP: the session's logging/setLevel); nil means it takes none.
	Log func(ctx context.Context, m LogMessage) error
	// Sample asks the caller for an LLM completion (in MCP: the client's
	// sampling capability). nil when the caller offers none.
	Sample func(ctx context.Context, r SampleRequest) (SampleResult, error)
	// Elicit asks the caller's user to fill in a form (in MCP: the client's
	// elicitation capability, form mode). nil when the caller offers none.
	Elicit func(ctx context.Context, r ElicitRequest) (ElicitResult, error)
	// ListRoots asks the caller for its roots (in MCP: roots/list, the
	// client's roots capability). nil when the caller offers none.
	ListRoots func(ctx context.Context) ([]Root, error)
	// Round, if not nil, makes the caller one that cannot be asked
	// mid-call and answers in rounds instead (see Ask): the body's
	// questions are answered from it, or end the call, and Sample, Elicit
	// and ListRoots are not called.
	Round *Round

	// task, set on a task body's own Client, makes the body's questions
	// the task's (see Catalog.UpdateTask).
	task *taskAsk
}

// Progress is one progress report. Progress must grow from one report to
// the next; Total is 0 when unknown.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// LogMessage is one log message to the caller. Data is any value that
// encodes as JSON (a string, a map); Logger names its source and may be
// empty.
//
// Level is a slog.Level. MCP has eight levels (RFC 5424's); slog names
// four of them, and the MCP Go SDK names all eight as slog levels
// (mcp.LevelDebug, LevelInfo, LevelNotice, LevelWarning, LevelError,
// LevelCritical, LevelAlert, LevelEmergency): notice is halfway between
// slog.LevelInfo and slog.LevelWarn, and critical, alert and emergency are
// slog.LevelError plus 4, 8 and 12. A level between two of them counts as
// the lower one.
type LogMessage struct {
	Level  slog.Level
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

// Log sends a log message of level (see LogMessage) to the caller, if it
// takes them; otherwise it does nothing and returns nil. ctx as for
// ReportProgress.
func (c Call) Log(ctx context.Context, level slog.Level, data any) error {
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
	tasks  bool
	share  TaskShare // taskshare.go
}

// WithClient gives the call's body cl to report to (see ReportProgress and
// ClientFrom): it rides in the body's ctx, at one allocation a call that
// has one. nil is a caller that takes nothing.
func WithClient(cl *Client) CallOption { return CallOption{client: cl} }

// WithTasks says the caller takes tasks: a body that calls Call.Detach
// ends the call with a task (Result.Task) rather than running the rest of
// its work on the caller's goroutine, and a tool whose TaskSupport is
// TaskRequired may be called.
func WithTasks() CallOption { return CallOption{tasks: true} }

// Role is who speaks a sampling message.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// SampleRequest asks the caller for an LLM completion of a conversation
// (MCP's sampling/createMessage). The caller chooses the model and may
// show the request to a person first; every field but Messages and
// MaxTokens is a wish it may ignore.
type SampleRequest struct {
	// Key names the question, as InputRequest.Key does; empty means
	// "sampling".
	Key string
	// Messages is the conversation so far, at least one message. Their
	// Content is text, image or audio.
	Messages []SampleMessage
	// MaxTokens bounds the completion's length; it must be positive.
	MaxTokens int64
	// SystemPrompt, if set, is the system prompt the body asks for.
	SystemPrompt string
	// Temperature, if not 0, is the sampling temperature asked for.
	Temperature float64
	// StopSequences end the completion where they occur.
	StopSequences []string
	// Model says which model the body would like; the zero value leaves
	// the choice to the caller.
	Model ModelPreferences
}

// SampleMessage is one message of a sampling conversation.
type SampleMessage struct {
	Role    Role
	Content Content
}

// ModelPreferences are a body's wishes for the model that samples: names
// to prefer, in order (a hint matches any model whose name contains it),
// and priorities between 0 and 1 (0: unimportant; 1: most important).
type ModelPreferences struct {
	Hints                []string
	CostPriority         float64
	SpeedPriority        float64
	IntelligencePriority float64
}

// SampleResult is the caller's completion: one message from the model
// (Role is normally RoleAssistant), the model's name, and why it stopped
// ("endTurn", "stopSequence", "maxTokens", or empty when not known).
type SampleResult struct {
	Role       Role
	Content    Content
	Model      string
	StopReason string
}

// ElicitRequest asks the caller's user to fill in a form (MCP's
// elicitation/create in form mode).
type ElicitRequest struct {
	// Key names the question, as InputRequest.Key does; empty means
	// "elicitation".
	Key string
	// Message tells the user what is asked and why; it must not be empty.
	Message string
	// Schema is the form: a JSON Schema object whose properties are flat
	// values (string, number, integer, boolean, or an array of enum
	// strings), with optional defaults (SEP-1034), titles, and the enum
	// forms of SEP-1330 (enum, oneOf with const and title, items with enum
	// or anyOf). Empty means a form with no fields: the user can only
	// accept, decline or cancel. The caller checks the schema in detail.
	Schema json.RawMessage
}

// ElicitAction is what the user did with a form.
type ElicitAction string

// The user's answers to an elicitation.
const (
	// ElicitAccept: the user submitted the form; ElicitResult.Content
	// holds the values.
	ElicitAccept ElicitAction = "accept"
	// ElicitDecline: the user explicitly refused.
	ElicitDecline ElicitAction = "decline"
	// ElicitCancel: the user dismissed the form without choosing.
	ElicitCancel ElicitAction = "cancel"
)

// ElicitResult is the user's answer. Content holds the submitted values,
// by property name, when Action is ElicitAccept (the caller checked them
// against the schema and filled in its defaults); it is nil otherwise.
type ElicitResult struct {
	Action  ElicitAction
	Content map[string]any
}

// Decode stores the submitted values in v, as json.Unmarshal does: a
// pointer to a struct whose json tags name the schema's properties.
func (r ElicitResult) Decode(v any) error {
	raw, err := json.Marshal(r.Content)
	if err != nil {
		return fmt.Errorf("catalog: elicitation result: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("catalog: elicitation result: %w", err)
	}
	return nil
}

// emptyForm is the schema of a form with no fields.
var emptyForm = json.RawMessage(`{"type":"object","properties":{}}`)

// Sample asks the caller for an LLM completion: Ask with one question,
// keyed r.Key. ctx must be the body's ctx or derive from it, as for
// ReportProgress; a caller asked mid-call is asked until ctx ends, so a
// caller that never answers holds the body only until the body's ctx
// ends: give ctx a deadline when the call's own context has none.
//
// Errors: a *CapabilityError, which is ErrNotSupported (errors.Is), when
// the caller offers no sampling, in which case nothing was sent;
// ErrInvalidRequest for a malformed request, likewise; ErrInputRequired
// from a caller that answers in rounds (see Ask), for the body to return;
// the ctx's error when it ended first; or the caller's error (in MCP: the
// client refused or failed). It is as safe for concurrent use as the
// caller's Client.Sample.
func (c Call) Sample(ctx context.Context, r SampleRequest) (SampleResult, error) {
	a, err := ask(ctx, c.Name, []InputRequest{{Key: r.Key, Sample: &r}})
	if err != nil {
		return SampleResult{}, err
	}
	return a[0].Sample, nil
}

func (r *SampleRequest) check() error {
	if len(r.Messages) == 0 {
		return fmt.Errorf("no messages")
	}
	if r.MaxTokens <= 0 {
		return fmt.Errorf("MaxTokens %d is not positive", r.MaxTokens)
	}
	for i, m := range r.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return fmt.Errorf("message %d: role %s is neither user nor assistant", i, quote.Name(string(m.Role)))
		}
		switch m.Content.Type {
		case TypeText, TypeImage, TypeAudio:
		default:
			return fmt.Errorf("message %d: content type %s is not text, image or audio", i, quote.Name(m.Content.Type))
		}
	}
	return nil
}

// Elicit asks the caller's user to fill in a form: Ask with one question,
// keyed r.Key, bounded by ctx as Sample is. A declined or cancelled form
// is an answer, not an error: check the result's Action.
//
// Errors: a *CapabilityError (ErrNotSupported) when the caller offers no
// elicitation (nothing was sent), ErrInvalidRequest for an empty message
// or a schema that is not a JSON object, ErrInputRequired as for Sample,
// the ctx's error, or the caller's error (in MCP: the client refused the
// schema, or returned values that do not match it).
func (c Call) Elicit(ctx context.Context, r ElicitRequest) (ElicitResult, error) {
	a, err := ask(ctx, c.Name, []InputRequest{{Key: r.Key, Elicit: &r}})
	if err != nil {
		return ElicitResult{}, err
	}
	return a[0].Elicit, nil
}

// isObject reports whether raw is one valid JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
