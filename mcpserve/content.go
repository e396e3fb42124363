package mcpserve

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// Content types of catalog.Content.Type.
const (
	typeText     = "text"
	typeImage    = "image"
	typeAudio    = "audio"
	typeResource = "resource"
)

// errUnsupportedContent: a tool result or an SDK content item has a type
// the other side cannot express.
var errUnsupportedContent = errors.New("mcpserve: unsupported content")

// contentToSDK converts one catalog content item to the SDK's: text to
// *mcp.TextContent, image to *mcp.ImageContent, audio to *mcp.AudioContent
// (Data is the raw bytes; the SDK base64-encodes them on the wire), resource
// to *mcp.EmbeddedResource. Another type, or a resource item without
// Resource, is errUnsupportedContent. The result shares c's byte slices.
func contentToSDK(c catalog.Content) (mcp.Content, error) {
	switch c.Type {
	case typeText:
		return &mcp.TextContent{Text: c.Text}, nil
	case typeImage:
		return &mcp.ImageContent{Data: c.Data, MIMEType: c.MIMEType}, nil
	case typeAudio:
		return &mcp.AudioContent{Data: c.Data, MIMEType: c.MIMEType}, nil
	case typeResource:
		if c.Resource == nil {
			return nil, fmt.Errorf("%w: resource item without contents", errUnsupportedContent)
		}
		return &mcp.EmbeddedResource{Resource: resourceContents(*c.Resource)}, nil
	}
	return nil, fmt.Errorf("%w: content type %q", errUnsupportedContent, c.Type)
}

// contentFromSDK converts an SDK content item, as a client receives it,
// back to the catalog's vocabulary: the inverse of contentToSDK. Types the
// catalog cannot express (resource links, sampling content) are
// errUnsupportedContent.
func contentFromSDK(c mcp.Content) (catalog.Content, error) {
	switch c := c.(type) {
	case *mcp.TextContent:
		return catalog.Content{Type: typeText, Text: c.Text}, nil
	case *mcp.ImageContent:
		return catalog.Content{Type: typeImage, Data: c.Data, MIMEType: c.MIMEType}, nil
	case *mcp.AudioContent:
		return catalog.Content{Type: typeAudio, Data: c.Data, MIMEType: c.MIMEType}, nil
	case *mcp.EmbeddedResource:
		if c.Resource == nil {
			return catalog.Content{}, fmt.Errorf("%w: embedded resource without contents", errUnsupportedContent)
		}
		rc := contentsFromSDK(c.Resource)
		return catalog.Content{Type: typeResource, Resource: &rc}, nil
	}
	return catalog.Content{}, fmt.Errorf("%w: %T", errUnsupportedContent, c)
}

// contentsFromSDK converts resource contents as a client receives them
// (resources/read, embedded resources) to catalog.Contents.
func contentsFromSDK(rc *mcp.ResourceContents) catalog.Contents {
	return catalog.Contents{URI: rc.URI, MIMEType: rc.MIMEType, Text: rc.Text, Blob: rc.Blob}
}

// resourceContents converts catalog contents to the wire: a non-nil Blob
// makes a blob item (Text is then dropped, as an item is one or the other),
// otherwise a text item.
func resourceContents(c catalog.Contents) *mcp.ResourceContents {
	rc := &mcp.ResourceContents{URI: c.URI, MIMEType: c.MIMEType}
	if c.Blob != nil {
		rc.Blob = c.Blob
	} else {
		rc.Text = c.Text
	}
	return rc
}

// toolResult converts a tool's result to the wire. Content is never null on
// the wire.
func toolResult(r catalog.Result) (*mcp.CallToolResult, error) {
	out := &mcp.CallToolResult{
		Content:           make([]mcp.Content, len(r.Content)),
		StructuredContent: r.StructuredContent,
		IsError:           r.IsError,
	}
	for i, c := range r.Content {
		sc, err := contentToSDK(c)
		if err != nil {
			return nil, fmt.Errorf("content item %d: %w", i, err)
		}
		out.Content[i] = sc
	}
	return out, nil
}
