package mcpserve_test

import (
	"testing"
)

// Every 2026-07-28 result of tools/call, resources/read and prompts/get
// says its type, "complete", on the fast path and on the SDK's, as the
// schema of that revision requires; a 2025 result has no such field.
func TestResultTypeComplete(t *testing.T) {
	p := newTwoPaths(t)
	for _, c := range []fastCase{
		{"echo", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, "", true},
		{"tool error", "tools/call", map[string]any{"name": "toolerror", "arguments": map[string]any{}}, "", true},
		{"read", "resources/read", map[string]any{"uri": "test://fixed"}, "", true},
		{"prompt", "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"who": "ada"}}, "", true},
	} {
		for _, v := range fastVersions {
			want := map[bool]any{true: "complete", false: nil}[v == "2026-07-28"]
			for _, url := range []string{p.fast.URL, p.sdk.URL} {
				a := p.send(t, url, c.exchange(v, 1))
				msg, _ := a.messages[len(a.messages)-1].(map[string]any)
				res, _ := msg["result"].(map[string]any)
				if res == nil || res["resultType"] != want {
					t.Errorf("%s %s at %s: %v; want resultType %v", v, c.name, url, msg, want)
				}
			}
		}
	}
}
