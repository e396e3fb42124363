package mcpserve

import (
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A holder's result (a tool call's, a read's, a prompt's) is decoded here
// into the SDK's types, with the decoder the fast path reads requests
// with, rather than by the SDK's own UnmarshalJSON, which allocates a
// 32 KiB read buffer for every value it decodes (nearly half of what a
// forward allocated). What this decoder does not know it leaves to the
// SDK's: a content type other than the five a tool result has, and a
// result that asks for input (2026-07-28's input_required), with its
// result type, input requests and request state. TestForwardMatchesLocal
// and TestHopDecodersMatchSDK hold the two to the same answers.

// hopContent is one content block of a tool result, as the SDK's
// wireContent reads the five types a tool result has.
type hopContent struct {
	Type        string                `json:"type"`
	Text        string                `json:"text,omitempty"`
	MIMEType    string                `json:"mimeType,omitempty"`
	Data        []byte                `json:"data,omitempty"`
	Resource    *mcp.ResourceContents `json:"resource,omitempty"`
	URI         string                `json:"uri,omitempty"`
	Name        string                `json:"name,omitempty"`
	Title       string                `json:"title,omitempty"`
	Description string                `json:"description,omitempty"`
	Size        *int64                `json:"size,omitempty"`
	Meta        mcp.Meta              `json:"_meta,omitempty"`
	Annotations *mcp.Annotations      `json:"annotations,omitempty"`
	Icons       []mcp.Icon            `json:"icons,omitempty"`
}

// content is c as the SDK's type for it, or nil for a type this decoder
// leaves to the SDK's.
func (c *hopContent) content() mcp.Content {
	switch c.Type {
	case "text":
		return &mcp.TextContent{Text: c.Text, Meta: c.Meta, Annotations: c.Annotations}
	case "image":
		return &mcp.ImageContent{Data: c.Data, MIMEType: c.MIMEType, Meta: c.Meta, Annotations: c.Annotations}
	case "audio":
		return &mcp.AudioContent{Data: c.Data, MIMEType: c.MIMEType, Meta: c.Meta, Annotations: c.Annotations}
	case "resource_link":
		return &mcp.ResourceLink{URI: c.URI, Name: c.Name, Title: c.Title, Description: c.Description,
			MIMEType: c.MIMEType, Size: c.Size, Meta: c.Meta, Annotations: c.Annotations, Icons: c.Icons}
	case "resource":
		return &mcp.EmbeddedResource{Resource: c.Resource, Meta: c.Meta, Annotations: c.Annotations}
	}
	return nil
}

// asksInput is what marks a 2026-07-28 result that asks for input.
type asksInput struct {
	ResultType    string          `json:"resultType"`
	InputRequests json.RawMessage `json:"inputRequests"`
	RequestState  string          `json:"requestState"`
}

// any reports whether the result asks for input. A "complete" result type
// is not kept: the replica that forwarded the call gives the result its
// own, where its caller's protocol has one.
func (a *asksInput) any() bool {
	return a.ResultType != "" && a.ResultType != "complete" || a.InputRequests != nil || a.RequestState != ""
}

// decodeToolResult decodes a tools/call result into res.
func decodeToolResult(data []byte, res *mcp.CallToolResult) error {
	var w struct {
		Meta              mcp.Meta     `json:"_meta"`
		Content           []hopContent `json:"content"`
		StructuredContent any          `json:"structuredContent"`
		IsError           bool         `json:"isError"`
		asksInput
	}
	w.Meta = metaFor(data)
	if _, err := segjson.Parse(data, &w, segjson.DontMatchCaseInsensitiveStructFields); err != nil || w.asksInput.any() {
		return json.Unmarshal(data, res)
	}
	if len(w.Meta) == 0 {
		w.Meta = nil
	}
	content := make([]mcp.Content, len(w.Content))
	for i := range w.Content {
		if content[i] = w.Content[i].content(); content[i] == nil {
			return json.Unmarshal(data, res)
		}
	}
	*res = mcp.CallToolResult{Meta: w.Meta, Content: content, StructuredContent: w.StructuredContent, IsError: w.IsError}
	return nil
}

// plainReadResult is the SDK's ReadResourceResult without its
// UnmarshalJSON.
type plainReadResult mcp.ReadResourceResult

// decodeReadResult decodes a resources/read result into res.
func decodeReadResult(data []byte, res *mcp.ReadResourceResult) error {
	var a asksInput
	if _, err := segjson.Parse(data, &a, segjson.DontMatchCaseInsensitiveStructFields); err != nil || a.any() {
		return json.Unmarshal(data, res)
	}
	*res = mcp.ReadResourceResult{Meta: metaFor(data)}
	if _, err := segjson.Parse(data, (*plainReadResult)(res), segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return err
	}
	if len(res.Meta) == 0 {
		res.Meta = nil
	}
	return nil
}

// hopPromptMessage is one message of a prompts/get result.
type hopPromptMessage struct {
	Role    mcp.Role   `json:"role"`
	Content hopContent `json:"content"`
}

// decodePromptResult decodes a prompts/get result into res.
func decodePromptResult(data []byte, res *mcp.GetPromptResult) error {
	var w struct {
		Meta        mcp.Meta           `json:"_meta"`
		Description string             `json:"description"`
		Messages    []hopPromptMessage `json:"messages"`
		asksInput
	}
	w.Meta = metaFor(data)
	if _, err := segjson.Parse(data, &w, segjson.DontMatchCaseInsensitiveStructFields); err != nil || w.asksInput.any() || w.Messages == nil {
		return json.Unmarshal(data, res)
	}
	if len(w.Meta) == 0 {
		w.Meta = nil
	}
	msgs := make([]*mcp.PromptMessage, len(w.Messages))
	for i := range w.Messages {
		c := w.Messages[i].Content.content()
		if c == nil {
			return json.Unmarshal(data, res)
		}
		msgs[i] = &mcp.PromptMessage{Role: w.Messages[i].Role, Content: c}
	}
	*res = mcp.GetPromptResult{Meta: w.Meta, Description: w.Description, Messages: msgs}
	return nil
}
