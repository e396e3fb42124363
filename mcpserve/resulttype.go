package mcpserve

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol 2026-07-28 gives every result of tools/call, resources/read and
// prompts/get a resultType: "complete", or "input_required" for one that
// asks the client for input (SEP-2322). The SDK sets it in its own
// handlers of those methods, which the Server's middleware answers in
// their place, and keeps it in a field of its own that nothing outside
// the SDK can set; its JSON decoder can. So each type's "complete" is
// decoded once, here, and a result is made complete by copying its
// exported fields onto that value.
var complete, inputRequired struct {
	call   mcp.CallToolResult
	read   mcp.ReadResourceResult
	prompt mcp.GetPromptResult
}

func init() {
	for _, c := range []struct {
		data string
		into any
	}{
		{`{"resultType":"complete","content":[]}`, &complete.call},
		{`{"resultType":"complete","contents":[]}`, &complete.read},
		{`{"resultType":"complete","messages":[]}`, &complete.prompt},
		{`{"resultType":"input_required","content":[]}`, &inputRequired.call},
		{`{"resultType":"input_required","contents":[]}`, &inputRequired.read},
		{`{"resultType":"input_required","messages":[]}`, &inputRequired.prompt},
	} {
		if err := json.Unmarshal([]byte(c.data), c.into); err != nil {
			panic("mcpserve: the SDK no longer decodes a complete result: " + err.Error())
		}
	}
}

// askInput returns the input_required result of method (tools/call,
// resources/read or prompts/get) that asks reqs, with state.
func askInput(method string, reqs mcp.InputRequestMap, state string) mcp.Result {
	switch method {
	case methodReadResource:
		r := inputRequired.read
		r.InputRequests, r.RequestState = reqs, state
		return &r
	case methodGetPrompt:
		r := inputRequired.prompt
		r.InputRequests, r.RequestState = reqs, state
		return &r
	}
	r := inputRequired.call
	r.InputRequests, r.RequestState = reqs, state
	return &r
}

// markComplete gives res, a 2026-07-28 result that asks for no input, the
// result type "complete" where its method has one.
func markComplete(res mcp.Result) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r.InputRequests == nil {
			c := complete.call
			c.Meta, c.Content, c.StructuredContent, c.IsError = r.Meta, r.Content, r.StructuredContent, r.IsError
			c.RequestState = r.RequestState
			*r = c
		}
	case *mcp.ReadResourceResult:
		if r.InputRequests == nil {
			c := complete.read
			c.Meta, c.Cacheable, c.Contents, c.RequestState = r.Meta, r.Cacheable, r.Contents, r.RequestState
			*r = c
		}
	case *mcp.GetPromptResult:
		if r.InputRequests == nil {
			c := complete.prompt
			c.Meta, c.Description, c.Messages, c.RequestState = r.Meta, r.Description, r.Messages, r.RequestState
			*r = c
		}
	}
}

// currentRequest reports whether req, a tools/call, resources/read or
// prompts/get, is of protocol 2026-07-28: its _meta names that revision,
// which is how the SDK tells one.
func currentRequest(req mcp.Request) bool {
	var meta mcp.Meta
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			meta = r.Params.Meta
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			meta = r.Params.Meta
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			meta = r.Params.Meta
		}
	}
	return namesCurrent(meta)
}
