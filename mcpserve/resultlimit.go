package mcpserve

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// overLimit reports n and whether it passes the server's result limit.
func (s *Server) overLimit(n int64) (int64, bool) { return n, n > s.maxResult }

// toolTooLarge is the answer to a tools/call whose result of n bytes (of
// more than n, with more set: a forwarded one cut short) is over the
// limit, local or forwarded alike: a tool error that states the limit.
func (s *Server) toolTooLarge(name string, n int64, more bool) *mcp.CallToolResult {
	s.log.Warn("mcpserve: tool result over the size limit; not sent", "tool", quote.Name(name), "bytes", n, "more", more, "limit", s.maxResult)
	return errorResult(fmt.Sprintf("tool %s: its result of %s exceeds this server's limit of %d bytes", quote.Name(name), bytesOf(n, more), s.maxResult))
}

// resourceTooLarge is toolTooLarge for a resources/read: an internal error
// that states the limit.
func (s *Server) resourceTooLarge(uri string, n int64, more bool) error {
	s.log.Warn("mcpserve: resource contents over the size limit; not sent", "uri", quote.Name(uri), "bytes", n, "more", more, "limit", s.maxResult)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("resource %s: its contents of %s exceed this server's limit of %d bytes", quote.Name(uri), bytesOf(n, more), s.maxResult)}
}

func bytesOf(n int64, more bool) string {
	if more {
		return fmt.Sprintf("more than %d bytes", n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// toolResultSize is what Options.MaxResultBytes counts of a tool result:
// text bytes, binary data as base64, structured content as JSON. Envelope
// overhead (field names, escaping) is not counted: the limit is on what a
// route returns, not an exact wire size.
func toolResultSize(r catalog.Result) int64 {
	var n int64
	for _, c := range r.Content {
		n += int64(len(c.Text)) + int64(base64.StdEncoding.EncodedLen(len(c.Data)))
		if c.Resource != nil {
			n += contentsSize(*c.Resource)
		}
	}
	if r.StructuredContent != nil {
		var w countingWriter
		// An unencodable value is the SDK's to report; it counts as 0.
		_ = json.NewEncoder(&w).Encode(r.StructuredContent)
		n += int64(w)
	}
	return n
}

// contentsSize is what Options.MaxResultBytes counts of resource contents.
func contentsSize(c catalog.Contents) int64 {
	return int64(len(c.Text)) + int64(base64.StdEncoding.EncodedLen(len(c.Blob)))
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// sdkToolResultSize is toolResultSize for a result as the SDK decoded it
// from a peer's answer.
func sdkToolResultSize(r *mcp.CallToolResult) int64 {
	var n int64
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += int64(len(c.Text))
		case *mcp.ImageContent:
			n += int64(base64.StdEncoding.EncodedLen(len(c.Data)))
		case *mcp.AudioContent:
			n += int64(base64.StdEncoding.EncodedLen(len(c.Data)))
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				n += sdkContentsSize(c.Resource)
			}
		}
	}
	if r.StructuredContent != nil {
		var w countingWriter
		_ = json.NewEncoder(&w).Encode(r.StructuredContent)
		n += int64(w)
	}
	return n
}

// sdkContentsSize is contentsSize for contents the SDK decoded.
func sdkContentsSize(c *mcp.ResourceContents) int64 {
	return int64(len(c.Text)) + int64(base64.StdEncoding.EncodedLen(len(c.Blob)))
}
