package catalog

import (
	"context"
	"encoding/json"

	"github.com/livereg/livereg/bindsec"
)

// Tool describes a tool route, as tools/list advertises it.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is the JSON Schema of the arguments, a JSON object. Empty
	// means {"type":"object"}.
	InputSchema json.RawMessage
	// OutputSchema, if set, is the JSON Schema of StructuredContent.
	OutputSchema json.RawMessage
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
}

// Content is one item of a tool result. Type is "text", "image", "audio" or
// "resource"; Text goes with text, Data and MIMEType with image and audio,
// Resource with resource.
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
}

// TextResult is a Result with a single text item.
func TextResult(text string) Result {
	return Result{Content: []Content{{Type: "text", Text: text}}}
}

// ErrorResult is a Result with IsError set and a single text item.
func ErrorResult(text string) Result {
	r := TextResult(text)
	r.IsError = true
	return r
}

// ToolHandler is a tool route's body. It runs on one of its consumer's
// bridge goroutines. An error it returns reaches the caller unchanged.
type ToolHandler func(ctx context.Context, c Call) (Result, error)

// Read is one resources/read as a ResourceReader receives it.
type Read struct {
	URI       string
	Principal bindsec.Principal
}

// Contents is a resource's contents: Text for text, Blob for binary data.
type Contents struct {
	URI      string
	MIMEType string
	Text     string
	Blob     []byte
}

// ResourceReader is a resource route's body.
type ResourceReader func(ctx context.Context, r Read) (Contents, error)
