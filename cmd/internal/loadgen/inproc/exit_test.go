package inproc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// An interrupted run is never a pass: it says INCOMPLETE and exits 3;
// violations still win.
func TestInterruptedRunIsIncomplete(t *testing.T) {
	for _, tt := range []struct {
		name        string
		interrupted bool
		errors      int64
		code        int
		verdict     string
	}{
		{"complete", false, 0, ExitOK, "PASS"},
		{"interrupted", true, 0, ExitIncomplete, "INCOMPLETE"},
		{"interrupted with errors", true, 1, ExitViolations, "FAIL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{
				Head:     report.Head{Interrupted: tt.interrupted},
				Findings: report.Findings{Errors: tt.errors, Checks: map[string]int64{}, Violations: map[string]int64{}},
			}
			if got := r.Verdict().ExitCode(); got != tt.code {
				t.Errorf("exit code = %d, want %d", got, tt.code)
			}
			var out bytes.Buffer
			r.WriteText(&out)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, tt.verdict+":") {
				t.Errorf("verdict line %q, want %s", last, tt.verdict)
			}
		})
	}
}
