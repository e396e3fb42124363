package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c Config)
		err   string // substring of the error; "" for none
	}{
		{"defaults", nil, func(t *testing.T, c Config) {
			if got, want := c, DefaultConfig(); got != want {
				t.Errorf("c = %v, want %v", got, want)
			}
		}, ""},
		{"everything", []string{"-resolvers", "3", "-consumers", "5", "-names", "7", "-cap", "2", "-duration", "3s",
			"-seed", "9", "-json", "out.json", "-mix", "drop=0,late=10", "-missing-plan", "deny", "-hold", "1ms", "-max-concurrent", "1"},
			func(t *testing.T, c Config) {
				if got, want := c.Resolvers, 3; got != want {
					t.Errorf("c.Resolvers = %v, want %v", got, want)
				}
				if got, want := c.Consumers, 5; got != want {
					t.Errorf("c.Consumers = %v, want %v", got, want)
				}
				if got, want := c.Names, 7; got != want {
					t.Errorf("c.Names = %v, want %v", got, want)
				}
				if got, want := c.Cap, 2; got != want {
					t.Errorf("c.Cap = %v, want %v", got, want)
				}
				if got, want := c.Duration, 3*time.Second; got != want {
					t.Errorf("c.Duration = %v, want %v", got, want)
				}
				if got := c.Seed; got != 9 {
					t.Errorf("c.Seed = %v, want 9", got)
				}
				if got, want := c.JSONPath, "out.json"; got != want {
					t.Errorf("c.JSONPath = %v, want %v", got, want)
				}
				if got, want := c.Mix.Drop, 0; got != want {
					t.Errorf("c.Mix.Drop = %v, want %v", got, want)
				}
				if got, want := c.Mix.Late, 10; got != want {
					t.Errorf("c.Mix.Late = %v, want %v", got, want)
				}
				if got, want := c.Mix.Stop, DefaultMix.Stop; got != want {
					t.Errorf("keys not given keep their defaults: c.Mix.Stop = %v, want %v", got, want)
				}
				if got, want := c.MissingPlan, bindsec.Deny; got != want {
					t.Errorf("c.MissingPlan = %v, want %v", got, want)
				}
				if got, want := c.Hold, time.Millisecond; got != want {
					t.Errorf("c.Hold = %v, want %v", got, want)
				}
				if got, want := c.MaxConcurrent, 1; got != want {
					t.Errorf("c.MaxConcurrent = %v, want %v", got, want)
				}
			}, ""},
		{"ops alone runs until ops", []string{"-ops", "1000"}, func(t *testing.T, c Config) {
			if got := c.Ops; got != 1000 {
				t.Errorf("c.Ops = %v, want 1000", got)
			}
			if got := c.Duration; got != 0 {
				t.Errorf("c.Duration = %v, want 0", got)
			}
		}, ""},
		{"ops with duration keeps both", []string{"-ops", "1000", "-duration", "2s"}, func(t *testing.T, c Config) {
			if got, want := c.Duration, 2*time.Second; got != want {
				t.Errorf("c.Duration = %v, want %v", got, want)
			}
		}, ""},
		{"target implies mcp", []string{"-target", "http://127.0.0.1:8080/mcp"}, func(t *testing.T, c Config) {
			if !c.MCP {
				t.Errorf("c.MCP = %v, want %v", false, true)
			}
		}, ""},
		{"target localhost", []string{"-target", "http://localhost:1/"}, nil, ""},
		{"protocol implies mcp", []string{"-protocol", "2026-07-28"}, func(t *testing.T, c Config) {
			if !c.MCP {
				t.Errorf("c.MCP = %v, want %v", false, true)
			}
			if got, want := c.Protocol, ProtocolCurrent; got != want {
				t.Errorf("c.Protocol = %v, want %v", got, want)
			}
		}, ""},
		{"protocol legacy", []string{"-mcp", "-protocol", "2025-11-25"}, func(t *testing.T, c Config) {
			if got, want := c.Protocol, ProtocolLegacy; got != want {
				t.Errorf("c.Protocol = %v, want %v", got, want)
			}
		}, ""},
		{"protocol unknown", []string{"-protocol", "2024-01-01"}, nil, `-protocol "2024-01-01": want 2025-11-25 or 2026-07-28`},
		{"target ipv6 loopback", []string{"-target", "http://[::1]:1/"}, nil, ""},
		{"unknown flag", []string{"-nope"}, nil, "flag provided but not defined"},
		{"positional", []string{"extra"}, nil, "unexpected argument"},
		{"zero resolvers", []string{"-resolvers", "0"}, nil, "-resolvers 0"},
		{"zero consumers", []string{"-consumers", "0"}, nil, "-consumers 0"},
		{"zero names", []string{"-names", "0"}, nil, "-names 0"},
		{"zero cap", []string{"-cap", "0"}, nil, "-cap 0"},
		{"negative duration", []string{"-duration", "-1s"}, nil, "-duration"},
		{"no end", []string{"-duration", "0"}, nil, "needs -ops"},
		{"negative ops", []string{"-ops", "-1"}, nil, "-ops -1"},
		{"bad duration", []string{"-duration", "soon"}, nil, "invalid value"},
		{"bad mix key", []string{"-mix", "explode=1"}, nil, "-mix"},
		{"bad mix value", []string{"-mix", "stop=x"}, nil, "-mix"},
		{"mix percent over 100", []string{"-mix", "late=101"}, nil, "up to 100"},
		{"mix no shapes", []string{"-mix", "stop=0,cancel=0,panic=0,drop=0"}, nil, "death shapes"},
		{"mix no ops", []string{"-mix", "call=0,get=0,read=0,list=0"}, nil, "operations"},
		{"mix no kinds", []string{"-mix", "tool=0,prompt=0,template=0,resource=0"}, nil, "kinds"},
		{"bad missing plan", []string{"-missing-plan", "maybe"}, nil, "-missing-plan"},
		{"remote target", []string{"-target", "http://10.0.0.1:8080/mcp"}, nil, "not loopback"},
		{"named remote target", []string{"-target", "http://example.com/mcp"}, nil, "not loopback"},
		{"target not http", []string{"-target", "ftp://127.0.0.1/"}, nil, "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseArgs(tt.args, &bytes.Buffer{})
			if tt.err != "" {
				if err == nil {
					t.Fatalf("err = nil, want an error")
				}
				if !strings.Contains(err.Error(), tt.err) {
					t.Errorf("%q lacks %q", err.Error(), tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestMainBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"-cap", "0"}, {"-bogus"}, {"-mix", "drop"}} {
		var out, errOut bytes.Buffer
		code := Main(args, &out, &errOut)
		if got, want := code, ExitUsage; got != want {
			t.Errorf("%v: code = %v, want %v", args, got, want)
		}
		if !strings.Contains(errOut.String(), UsageLine) {
			t.Errorf("%q lacks %q", errOut.String(), UsageLine)
		}
		if got := out.String(); got != "" {
			t.Errorf("no run, no report: out.String() = %q, want empty", got)
		}
	}
}

func TestMainHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if got, want := Main([]string{"-h"}, &out, &errOut), ExitOK; got != want {
		t.Errorf("Main([]string{\"-h\"}, &out, &errOut) = %v, want %v", got, want)
	}
	for _, f := range []string{"-resolvers", "-consumers", "-names", "-cap", "-mix", "-duration", "-ops", "-seed", "-json", "-mcp", "-target"} {
		if !regexp.MustCompile(`(?m)^  ` + f + `\b.*\n\s+\S`).MatchString(out.String()) {
			t.Errorf("-h does not document %s: %q does not match %q", f, out.String(), `(?m)^  `+f+`\b.*\n\s+\S`)
		}
	}
}

// A short clean run through Main: exit 0, the text report, and the JSON
// report with every key the README documents.
func TestMainJSONReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	var out, errOut bytes.Buffer
	code := Main([]string{"-duration", "400ms", "-seed", "7", "-json", path}, &out, &errOut)
	if got, want := code, ExitOK; got != want {
		t.Fatalf("stdout:\n%s\nstderr:\n%s: code = %v, want %v", out.String(), errOut.String(), got, want)
	}
	if !strings.Contains(out.String(), "PASS: 0 violations") {
		t.Errorf("%q lacks %q", out.String(), "PASS: 0 violations")
	}
	if got := errOut.String(); got != "" {
		t.Errorf("no progress line when stderr is not a terminal: errOut.String() = %q, want empty", got)
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("json.Unmarshal(raw, &m): %v", err)
	}
	for _, k := range []string{"violations", "deaths", "ops", "takeovers", "cap_rejections", "duration_s", "seed"} {
		if _, ok := m[k]; !ok {
			t.Errorf("the JSON report lacks %q: %v", k, m)
		}
	}
	if got := m["seed"]; got != 7.0 { // a JSON number decodes as a float64
		t.Errorf("m[\"seed\"] = %v, want 7", got)
	}
	viol := m["violations"].(map[string]any)
	if got := len(viol); got != len(Invariants) {
		t.Errorf("len(viol) = %d, want %d", got, len(Invariants))
	}
	for _, inv := range Invariants {
		if _, ok := viol[inv.String()]; !ok {
			t.Errorf("every invariant is present, even at 0: violations lack %q: %v", inv, viol)
		}
	}
	deaths := m["deaths"].(map[string]any)
	for _, k := range []string{"stop", "cancel", "panic", "drop"} {
		if _, ok := deaths[k]; !ok {
			t.Errorf("deaths lack %q: %v", k, deaths)
		}
	}
	ops := m["ops"].(map[string]any)
	call, ok := ops["call"].(map[string]any)
	if !ok {
		t.Fatalf("ops lack call: %v", ops)
	}
	for _, k := range []string{"count", "ops_per_sec", "p50_ns", "p99_ns", "p999_ns", "max_ns"} {
		if _, ok := call[k]; !ok {
			t.Errorf("ops.call lacks %q: %v", k, call)
		}
	}
}

// A run that finds violations exits 1 and lists them.
func TestMainViolationsExit1(t *testing.T) {
	orig := newSystem
	defer func() { newSystem = orig }()
	var fake *fakeSystem
	newSystem = func(_ context.Context, cfg Config, _ *RunOptions) (System, func(), error) {
		fake = newFake(cfg.Cap, bugNoAuth)
		return fake, fake.Close, nil
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"-duration", "300ms", "-json", "-"}, &out, &errOut)
	if got, want := code, ExitViolations; got != want {
		t.Errorf("code = %v, want %v", got, want)
	}
	if !strings.Contains(out.String(), "VIOLATION unauthenticated_body: ") {
		t.Errorf("%q lacks %q", out.String(), "VIOLATION unauthenticated_body: ")
	}
	if !strings.Contains(out.String(), "FAIL: ") {
		t.Errorf("%q lacks %q", out.String(), "FAIL: ")
	}
	if !(strings.Contains(out.String(), `"unauthenticated_body": `)) {
		t.Errorf("JSON on stdout with -json -: strings.Contains(out.String(), `\"unauthenticated_body\": `) = %v, want %v", false, true)
	}
}
