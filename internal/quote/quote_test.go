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
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"...`},
	}
	for _, tt := range tests {
		if got := Name(tt.in); got != tt.want {
			t.Errorf("Name(%.10q...) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
