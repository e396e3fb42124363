package quote

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"tool", `"tool"`},
		{"bad\xff", `"bad\xff"`},
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"...(65 bytes)`},
	}
	for _, tt := range tests {
		if got := Name(tt.in); got != tt.want {
			t.Errorf("Name(%.10q...) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	long := strings.Repeat("x", 3000)
	a64 := strings.Repeat("x", 64)
	tests := []struct{ in, want string }{
		{"method not found", "method not found"},
		{`method not found: "` + long + `"`, `method not found: "` + a64 + `..."(3000 bytes)`},
		{`header mismatch: Mcp-Name header value '` + long + `' does not match body value 'b'`,
			`header mismatch: Mcp-Name header value '` + a64 + `...'(3000 bytes) does not match body value 'b'`},
		{`unrecognized reference type "` + strings.Repeat(`\"`, 100) + `"`,
			`unrecognized reference type "` + strings.Repeat(`\"`, 32) + `..."(200 bytes)`},
		{`unclosed "` + long, `unclosed "` + a64 + `..."(3000 bytes)`},
		{long, long[:MaxMessage] + "...(3000 bytes)"},
	}
	for _, tt := range tests {
		if got := Message(tt.in); got != tt.want {
			t.Errorf("Message(%.40q...) = %.200s, want %.200s", tt.in, got, tt.want)
		}
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"longer", 4, "long..."},
		{"héllo", 2, "h..."}, // é is two bytes: no half rune
		{"héllo", 3, "hé..."},
		{"", 0, ""},
		{"é", 0, "..."},
	}
	for _, tt := range tests {
		if got := Cut(tt.in, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
