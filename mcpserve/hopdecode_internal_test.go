package mcpserve

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hop's decoders give what the SDK's UnmarshalJSON gives, for every
// content type and field a result may carry, and for what they leave to
// the SDK's.
func TestHopDecodersMatchSDK(t *testing.T) {
	tools := []string{
		`{"content":[]}`,
		`{"content":[{"type":"text","text":"hi <&>"}],"isError":true}`,
		`{"content":[{"type":"text","text":"a","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}}],"_meta":{"m":"v"}}`,
		`{"content":[{"type":"image","data":"AAEC","mimeType":"image/png"},{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x://a","mimeType":"text/plain","text":"t"}},{"type":"resource","resource":{"uri":"x://b","blob":"AAEC"}}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x://a","text":"t"},"annotations":{"priority":1},"_meta":{"k":"v"}}]}`,
		`{"content":[{"type":"image","data":"AA==","mimeType":"image/png","annotations":{"audience":["assistant"]},"_meta":{"i":1}},{"type":"audio","data":"AA==","mimeType":"audio/wav","annotations":{"priority":0},"_meta":{"a":1}}]}`,
		`{"content":[{"type":"resource_link","uri":"x://l","name":"l","annotations":{"priority":0.1},"_meta":{"l":1}}]}`,
		`{"content":[{"type":"resource_link","uri":"x://l","name":"l","title":"L","description":"d","mimeType":"text/plain","size":12,"icons":[{"src":"https://i/x.png"}]}]}`,
		`{"content":[{"type":"text","text":"{\"n\":1}"}],"structuredContent":{"n":1,"s":["a",2.5,null,true]}}`,
		// Left to the SDK's: a type a tool result does not have, and a
		// result that asks for input.
		`{"content":[{"type":"tool_use","id":"u","name":"n","input":{"a":1}}]}`,
		`{"content":[],"resultType":"input_required","requestState":"s"}`,
	}
	for _, data := range tools {
		var want, got mcp.CallToolResult
		werr := json.Unmarshal([]byte(data), &want)
		gerr := decodeToolResult([]byte(data), &got)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("tool result %s:\n got %#v, %v\nwant %#v, %v", data, got, gerr, want, werr)
		}
	}
	prompts := []string{
		`{"messages":[]}`,
		`{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi <&>"}},{"role":"assistant","content":{"type":"text","text":"a","annotations":{"priority":0.5},"_meta":{"k":1}}}],"_meta":{"m":"v"}}`,
		`{"messages":[{"role":"user","content":{"type":"image","data":"AAEC","mimeType":"image/png"}},{"role":"user","content":{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}}]}`,
		`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"x://a","mimeType":"text/plain","text":"t"}}},{"role":"user","content":{"type":"resource_link","uri":"x://l","name":"l"}}]}`,
		// Left to the SDK's.
		`{"messages":[{"role":"user","content":{"type":"tool_use","id":"u","name":"n","input":{}}}]}`,
		`{"messages":[],"resultType":"input_required","requestState":"s"}`,
	}
	for _, data := range prompts {
		var want, got mcp.GetPromptResult
		werr := json.Unmarshal([]byte(data), &want)
		gerr := decodePromptResult([]byte(data), &got)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("prompt result %s:\n got %#v, %v\nwant %#v, %v", data, got, gerr, want, werr)
		}
	}
	reads := []string{
		`{"contents":[{"uri":"x://a","mimeType":"text/plain","text":"t"}],"ttlMs":0,"cacheScope":"public"}`,
		`{"contents":[{"uri":"x://b","blob":"AAEC","_meta":{"k":"v"}}],"_meta":{"m":1},"ttlMs":5000,"cacheScope":"private"}`,
		`{"contents":[],"resultType":"input_required","requestState":"s"}`,
	}
	for _, data := range reads {
		var want, got mcp.ReadResourceResult
		werr := json.Unmarshal([]byte(data), &want)
		gerr := decodeReadResult([]byte(data), &got)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("read result %s:\n got %#v, %v\nwant %#v, %v", data, got, gerr, want, werr)
		}
	}
}
