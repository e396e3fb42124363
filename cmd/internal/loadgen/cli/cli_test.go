package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

type fakeConfig struct {
	Common
	Fail bool // the run fails to start
}

type fakeReport struct {
	Seed    uint64 `json:"seed"`
	verdict report.Verdict
}

func (r *fakeReport) WriteText(out io.Writer) { fmt.Fprintf(out, "seed %d\n", r.Seed) }
func (r *fakeReport) Verdict() report.Verdict { return r.verdict }

// fake is a world whose flags are -seed, -json and -fail, and whose run
// reports what verdict says.
func fake(verdict report.Verdict) World[fakeConfig, *fakeReport] {
	return World[fakeConfig, *fakeReport]{
		Help:  "fake -h",
		Usage: "usage: fake",
		Parse: func(args []string, stdout io.Writer) (fakeConfig, error) {
			var cfg fakeConfig
			fs := flag.NewFlagSet("fake", flag.ContinueOnError)
			fs.SetOutput(stdout)
			cfg.Common.Flags(fs, Help{})
			fs.BoolVar(&cfg.Fail, "fail", false, "")
			return cfg, fs.Parse(args)
		},
		Common: func(cfg *fakeConfig) *Common { return &cfg.Common },
		Run: func(_ context.Context, cfg fakeConfig, _ io.Writer) (*fakeReport, error) {
			if cfg.Fail {
				return nil, errors.New("cannot start")
			}
			return &fakeReport{Seed: cfg.Seed, verdict: verdict}, nil
		},
	}
}

func TestMainExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		verdict report.Verdict
		code    int
		stderr  string
	}{
		{"pass", []string{"-seed", "5"}, report.Verdict{}, report.ExitOK, ""},
		{"violation", nil, report.Verdict{Violations: 1, Interrupted: true}, report.ExitViolations, ""},
		{"error", nil, report.Verdict{Errors: 1}, report.ExitViolations, ""},
		{"interrupted", nil, report.Verdict{Interrupted: true}, report.ExitIncomplete, ""},
		{"help", []string{"-h"}, report.Verdict{}, report.ExitOK, ""},
		{"bad flag", []string{"-nope"}, report.Verdict{}, report.ExitUsage, "usage: fake\nrun 'fake -h' for every flag"},
		{"no start", []string{"-fail"}, report.Verdict{}, report.ExitViolations, "loadgen: cannot start"},
		{"bad json path", []string{"-json", filepath.Join(t.TempDir(), "no", "such", "dir.json")}, report.Verdict{}, report.ExitViolations, "loadgen: -json:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(fake(tt.verdict), tt.args, &out, &errb); code != tt.code {
				t.Errorf("Main(%q) = %d, want %d; stderr %s", tt.args, code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderr)
			}
		})
	}
}

// A run without -seed gets a random seed other than 0, which the report
// and its JSON carry; a given one is kept.
func TestMainSeedAndJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	var out, errb bytes.Buffer
	if code := Main(fake(report.Verdict{}), []string{"-json", path}, &out, &errb); code != report.ExitOK {
		t.Fatalf("code %d; stderr %s", code, errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Seed uint64 }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Seed == 0 || !strings.Contains(out.String(), fmt.Sprintf("seed %d\n", got.Seed)) {
		t.Errorf("JSON seed %d, text %q: want the same seed, not 0", got.Seed, out.String())
	}

	out.Reset()
	if code := Main(fake(report.Verdict{}), []string{"-seed", "7", "-json", "-"}, &out, &errb); code != report.ExitOK {
		t.Fatalf("code %d; stderr %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "seed 7\n{") || !strings.Contains(out.String(), `"seed": 7`) {
		t.Errorf("stdout %q: want the text report then its JSON, seed 7", out.String())
	}
}
