package loadgen

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Main sends -fleet N to the fleet world and everything else, -fleet 0
// stripped, to the in-process one; the in-process help names -fleet.
func TestMainDispatch(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		code     int
		stdout   string // a substring of stdout
		stderr   string // a substring of stderr
		noStdout string // not in stdout
	}{
		{args: []string{"-h"}, code: report.ExitOK, stdout: "-fleet N"},
		{args: []string{"-fleet", "3", "-h"}, code: report.ExitOK, stdout: "-fleet-ttl", noStdout: "-fleet N\n"},
		{args: []string{"-fleet=0", "-h"}, code: report.ExitOK, stdout: "-mcp", noStdout: "-fleet-ttl"},
		{args: []string{"-fleet=0", "-bogus"}, code: report.ExitUsage, stderr: "run 'loadgen -h' for every flag"},
		{args: []string{"-fleet", "2", "-mcp"}, code: report.ExitUsage, stderr: "run 'loadgen -fleet 3 -h' for every flag"},
		{args: []string{"-fleet", "-1"}, code: report.ExitUsage, stderr: "loadgen -fleet"},
	} {
		var out, errb bytes.Buffer
		code := Main(tt.args, &out, &errb)
		if code != tt.code {
			t.Errorf("Main(%q) = %d, want %d; stderr %s", tt.args, code, tt.code, errb.String())
		}
		if !strings.Contains(out.String(), tt.stdout) {
			t.Errorf("Main(%q): stdout lacks %q:\n%s", tt.args, tt.stdout, out.String())
		}
		if !strings.Contains(errb.String(), tt.stderr) {
			t.Errorf("Main(%q): stderr lacks %q:\n%s", tt.args, tt.stderr, errb.String())
		}
		if tt.noStdout != "" && strings.Contains(out.String(), tt.noStdout) {
			t.Errorf("Main(%q): stdout has %q:\n%s", tt.args, tt.noStdout, out.String())
		}
	}
}
