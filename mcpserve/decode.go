package mcpserve

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/livereg/livereg/internal/strictjson"
)

// One decoder, one decision. Every POST's body, on the public endpoint
// (serveHTTP) and on the fleet's (serveForwarded), is held to the rules of
// internal/strictjson before anything reads it: the Mcp-Param check,
// tasks/*, the fast path, screen and the SDK. Past that point every
// reader sees one value with no duplicate and no case-variant names, so
// that a case-sensitive decoder (the fast path's, the SDK's) and one that
// folds case, one that keeps the first duplicate and one that keeps the
// last, all read the same message, and each reads the method, the name
// and the arguments from it, never from the raw bytes. A body that breaks
// a rule gets HTTP 400 with JSON-RPC -32700 (parse error) and a null id,
// quoting at most quote.Most bytes of it, before any check or handler has
// seen it.
//
// The protocol headers are held to one value each: a gateway that reads
// the last of two could judge another request than the server, which
// reads the first. Repeated, Mcp-Method, Mcp-Name, any Mcp-Param-* and
// MCP-Protocol-Version get 400, as two Authorization headers do.

// strictBody refuses data, a POST's body, that strictjson.Check refuses,
// and reports whether it did not. Cost: one allocation-free pass over the
// body (BenchmarkFastPath* measures it with the rest of the fast path).
func strictBody(w http.ResponseWriter, data []byte) bool {
	if err := strictjson.Check(data); err != nil {
		refuseMessage(w, nil, jsonrpc.CodeParseError, "Parse error: "+err.Error())
		return false
	}
	return true
}

// paramHeaderPrefix begins every custom header of SEP-2243, as
// http.Header spells it.
const paramHeaderPrefix = "Mcp-Param-"

// repeatedHeader returns the name of a protocol header h carries more
// than once, or "". It costs a look at each header name.
func repeatedHeader(h http.Header) string {
	for _, name := range [...]string{methodHeader, nameHeader, protocolHeader} {
		if len(h[name]) > 1 {
			return name
		}
	}
	for name, v := range h {
		if len(v) > 1 && strings.HasPrefix(name, paramHeaderPrefix) {
			return name
		}
	}
	return ""
}

// refuseRepeatedHeader answers a request that repeats a protocol header
// (400), and reports whether it did not.
func refuseRepeatedHeader(w http.ResponseWriter, r *http.Request) bool {
	if name := repeatedHeader(r.Header); name != "" {
		http.Error(w, "Bad Request: more than one "+name+" header", http.StatusBadRequest)
		return false
	}
	return true
}
