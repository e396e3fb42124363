package catalog

import (
	"context"
	"encoding/json"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

// Tool describes a tool route, as tools/list advertises it.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is the JSON Schema of the arguments, a JSON object. Empty
	// means {"type":"object"}. StartTool compiles it, and every call's
	// arguments are checked against it before the body runs.
	InputSchema json.RawMessage
	// OutputSchema, if set, is the JSON Schema of StructuredContent, which
	// every result that is not a tool error must then match.
	OutputSchema json.RawMessage
	// TaskSupport says whether its calls may run as tasks (StartTask);
	// the zero value forbids it.
	TaskSupport TaskSupport
}

// Resource describes a resource route, as resources/list advertises it.
type Resource struct {
	URI         string
	Name        string
	Description string
	MIMEType    string
}

// Call is one tools/call as a ToolHandler receives it.
type Call struct {
	Name      string
	Arguments json.RawMessage
	// Principal is who the guard admitted: the zero Principal for a public
	// route.
	Principal bindsec.Principal
	// Owner is the route's owner. The body's ctx is its caller's and does
	// not end when the owner dies; a body that must stop working once its
	// consumer is gone selects on Owner.Done() beside ctx.Done().
	Owner owner.Ref
	// Seven words, with ctx's two the nine that Go's register ABI passes
	// in registers: a field more and every call copies the Call through
	// memory. What the body can report to travels in its ctx instead (see
	// ReportProgress).
}

// The values of Content.Type: the MCP content types a catalog carries.
const (
	TypeText     = "text"     // Text
	TypeImage    = "image"    // Data and MIMEType
	TypeAudio    = "audio"    // Data and MIMEType
	TypeResource = "resource" // Resource
)

// Content is one item of a tool result or a prompt message. Type is one of
// TypeText, TypeImage, TypeAudio and TypeResource, and says which of the
// other fields hold the item.
type Content struct {
	Type     string
	Text     string
	MIMEType string
	Data     []byte
	Resource *Contents
}

// Result is what a tool call returns. IsError marks a failure the model
// should see (a tool execution error), as opposed to a protocol error.
type Result struct {
	Content           []Content
	StructuredContent any
	IsError           bool
	// Task, set only in a CallTool's result, is the task the body
	// detached into (Call.Detach) for a caller that takes tasks
	// (WithTasks); the other fields are then empty.
	Task *Task
}

// TextResult is a Result with a single text item.
func TextResult(text string) Result {
	return Result{Content: []Content{{Type: TypeText, Text: text}}}
}

// ErrorResult is a Result with IsError set and a single text item.
func ErrorResult(text string) Result {
	r := TextResult(text)
	r.IsError = true
	return r
}

// ToolHandler is a tool route's body. It runs on the goroutine that called
// CallTool, as many at once as there are callers unless the route was
// started WithMaxConcurrent, with the caller's ctx. An error it returns
// reaches the caller unchanged; a panic kills its consumer and reaches the
// caller as ErrRoutePanicked; runtime.Goexit kills it too, and ends the
// caller's goroutine (ErrRouteExited).
type ToolHandler func(ctx context.Context, c Call) (Result, error)

// Read is one resources/read as a ResourceReader receives it.
type Read struct {
	URI       string
	Principal bindsec.Principal
	// Vars are the variables a resource template matched in URI (see
	// Catalog.ReadResource), percent-decoded: "a%2Fb" is "a/b", so a variable
	// may hold "/", "..", or any other byte a client encodes. Unless the
	// template sets AllowRawBytes, none holds a NUL byte or invalid
	// UTF-8. A body that uses one as a path or a key must check it. nil
	// for a fixed resource. Read-only.
	Vars map[string]string
	// RawVars are the same variables as the client sent them, not
	// decoded ("a%2Fb"); the same map as Vars when URI holds no '%'.
	// Read-only.
	RawVars map[string]string
	// Owner is the route's owner, as in Call.
	Owner owner.Ref
}

// Contents is a resource's contents: Text for text, Blob for binary data.
type Contents struct {
	URI      string
	MIMEType string
	Text     string
	Blob     []byte
	// CacheTTL and CachePublic are the caching hint a client of MCP
	// 2026-07-28 gets with these contents as a resources/read result
	// (contents embedded in a tool's result carry none): how long it may keep them
	// (ttlMs; 0, the zero value, means it must read again), and whether
	// they are the same for every caller (cacheScope "public") rather
	// than for this one alone ("private", the zero value). The zero
	// values promise nothing; a reader whose contents depend on
	// Read.Principal must leave CachePublic false.
	CacheTTL    time.Duration
	CachePublic bool
}

// ResourceReader is a resource route's body. It runs as a ToolHandler does.
type ResourceReader func(ctx context.Context, r Read) (Contents, error)
