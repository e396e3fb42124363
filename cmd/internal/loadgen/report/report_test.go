package report

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestVerdict(t *testing.T) {
	tests := []struct {
		name       string
		v          Verdict
		wantFailed bool
		wantCode   int
		wantLine   string
	}{
		{"clean", Verdict{DurationS: 3}, false, ExitOK, "\nPASS: 0 violations\n"},
		{"violations", Verdict{Violations: 2}, true, ExitViolations, "\nFAIL: 2 violations, 0 errors\n"},
		{"errors alone fail", Verdict{Errors: 1}, true, ExitViolations, "\nFAIL: 0 violations, 1 errors\n"},
		{"interrupted is never a pass", Verdict{Interrupted: true, DurationS: 1.234}, false, ExitIncomplete,
			"\nINCOMPLETE: interrupted after 1.23s; 0 violations so far\n"},
		{"violations win over an interruption", Verdict{Violations: 1, Interrupted: true}, true, ExitViolations,
			"\nFAIL: 1 violations, 0 errors\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Failed(); got != tt.wantFailed {
				t.Errorf("Failed = %v, want %v", got, tt.wantFailed)
			}
			if got := tt.v.ExitCode(); got != tt.wantCode {
				t.Errorf("ExitCode = %d, want %d", got, tt.wantCode)
			}
			var b bytes.Buffer
			WriteEnd[key](&b, nil, nil, nil, tt.v)
			if b.String() != tt.wantLine {
				t.Errorf("WriteEnd wrote %q, want %q", b.String(), tt.wantLine)
			}
		})
	}
}

type key string

func (k key) String() string { return string(k) }

func TestWriteEnd(t *testing.T) {
	tests := []struct {
		name     string
		invs     []key
		examples map[string][]string
		errs     []string
		want     string
	}{
		{"in the invariants' order, then the errors",
			[]key{"b", "a"}, map[string][]string{"a": {"a1", "a2"}, "b": {"b1"}}, []string{"e1"},
			"VIOLATION b: b1\nVIOLATION a: a1\nVIOLATION a: a2\nERROR: e1\n\nFAIL: 3 violations, 1 errors\n"},
		{"only the invariants listed", []key{"a"}, map[string][]string{"a": {"a1"}, "z": {"z1"}}, nil,
			"VIOLATION a: a1\n\nFAIL: 3 violations, 1 errors\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			WriteEnd(&b, tt.invs, tt.examples, tt.errs, Verdict{Violations: 3, Errors: 1})
			if b.String() != tt.want {
				t.Errorf("wrote\n%q\nwant\n%q", b.String(), tt.want)
			}
		})
	}
}

func TestCountsAndTotal(t *testing.T) {
	tests := []struct {
		name  string
		m     map[string]int64
		order []string
		want  string
		total int64
	}{
		{"nil", nil, []string{"ok"}, "none", 0},
		{"zeros only", map[string]int64{"ok": 0, "gone": 0}, []string{"ok", "gone"}, "none", 0},
		{"order, not the map's", map[string]int64{"gone": 2, "ok": 5, "other": 0}, []string{"ok", "other", "gone"}, "ok 5, gone 2", 7},
		{"keys not in order are left out", map[string]int64{"ok": 1, "stray": 4}, []string{"ok"}, "ok 1", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Counts(tt.m, tt.order); got != tt.want {
				t.Errorf("Counts = %q, want %q", got, tt.want)
			}
			if got := Total(tt.m); got != tt.total {
				t.Errorf("Total = %d, want %d", got, tt.total)
			}
		})
	}
}

func TestWriteJSONFile(t *testing.T) {
	v := struct {
		A int            `json:"a"`
		B map[string]int `json:"b"`
	}{1, map[string]int{"x": 2}}
	const want = "{\n  \"a\": 1,\n  \"b\": {\n    \"x\": 2\n  }\n}\n"
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		stdout  string // what stdout should get
		file    string // what the file at path should hold, "" for none
		wantErr bool
	}{
		{"stdout", "-", want, "", false},
		{"a file", filepath.Join(dir, "r.json"), "", want, false},
		{"a file that cannot be created", filepath.Join(dir, "missing", "r.json"), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := WriteJSONFile(tt.path, v, &out)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if out.String() != tt.stdout {
				t.Errorf("stdout got %q, want %q", out.String(), tt.stdout)
			}
			if tt.file != "" {
				b, err := os.ReadFile(tt.path)
				if err != nil || string(b) != tt.file {
					t.Errorf("file holds %q (%v), want %q", b, err, tt.file)
				}
			}
		})
	}
}

func TestInterruptible(t *testing.T) {
	t.Run("a signal ends it", func(t *testing.T) {
		ctx, stop := Interruptible(context.Background())
		defer stop()
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("SIGTERM did not end the context")
		}
	})
	t.Run("stop ends it", func(t *testing.T) {
		ctx, stop := Interruptible(context.Background())
		if ctx.Err() != nil {
			t.Fatal("done before any signal")
		}
		stop()
		if !strings.Contains(context.Cause(ctx).Error(), "canceled") {
			t.Errorf("cause %v, want canceled", context.Cause(ctx))
		}
	})
}
