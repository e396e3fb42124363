package mcpserve

import (
	"encoding/base64"
	"encoding/json"

	"github.com/livereg/livereg/catalog"
)

// overLimit reports n and whether it passes the server's result limit.
func (s *Server) overLimit(n int64) (int64, bool) { return n, n > s.maxResult }

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
