package mcpserve

import (
	"log/slog"
	"testing"
	"time"
)

// Only the SDK's per-session lifecycle and its list_changed deliveries
// that a stateless session cannot take are demoted; anything else keeps
// its level.
func TestDemoted(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		msg   string
		want  bool
	}{
		{slog.LevelInfo, "server session connected", true},
		{slog.LevelInfo, "session initialized", true},
		{slog.LevelInfo, "server listening", false},
		{slog.LevelWarn, "server session connected", false},
		{slog.LevelWarn, "calling notifications/tools/list_changed: rejected by transport: undelivered message: no stream", true},
		{slog.LevelWarn, "calling notifications/resources/list_changed: session is closed", true},
		{slog.LevelWarn, "calling notifications/progress: rejected by transport: undelivered message: no stream", false},
		{slog.LevelWarn, "calling notifications/tools/list_changed: context deadline exceeded", false},
		{slog.LevelError, "calling notifications/tools/list_changed: session is closed", false},
	} {
		if got := demoted(slog.NewRecord(time.Time{}, tc.level, tc.msg, 0)); got != tc.want {
			t.Errorf("demoted(%v %q) = %v, want %v", tc.level, tc.msg, got, tc.want)
		}
	}
}
