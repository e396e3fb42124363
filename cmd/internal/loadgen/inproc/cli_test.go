package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c Config)
		err   string // substring of the error; "" for none
	}{
		{"defaults", nil, func(t *testing.T, c Config) {
			assert.Equal(t, DefaultConfig(), c)
		}, ""},
		{"everything", []string{"-resolvers", "3", "-consumers", "5", "-names", "7", "-cap", "2", "-duration", "3s",
			"-seed", "9", "-json", "out.json", "-mix", "drop=0,late=10", "-missing-plan", "deny", "-hold", "1ms", "-max-concurrent", "1"},
			func(t *testing.T, c Config) {
				assert.Equal(t, 3, c.Resolvers)
				assert.Equal(t, 5, c.Consumers)
				assert.Equal(t, 7, c.Names)
				assert.Equal(t, 2, c.Cap)
				assert.Equal(t, 3*time.Second, c.Duration)
				assert.EqualValues(t, 9, c.Seed)
				assert.Equal(t, "out.json", c.JSONPath)
				assert.Equal(t, 0, c.Mix.Drop)
				assert.Equal(t, 10, c.Mix.Late)
				assert.Equal(t, DefaultMix.Stop, c.Mix.Stop, "keys not given keep their defaults")
				assert.Equal(t, bindsec.Deny, c.MissingPlan)
				assert.Equal(t, time.Millisecond, c.Hold)
				assert.Equal(t, 1, c.MaxConcurrent)
			}, ""},
		{"ops alone runs until ops", []string{"-ops", "1000"}, func(t *testing.T, c Config) {
			assert.EqualValues(t, 1000, c.Ops)
			assert.Zero(t, c.Duration)
		}, ""},
		{"ops with duration keeps both", []string{"-ops", "1000", "-duration", "2s"}, func(t *testing.T, c Config) {
			assert.Equal(t, 2*time.Second, c.Duration)
		}, ""},
		{"target implies mcp", []string{"-target", "http://127.0.0.1:8080/mcp"}, func(t *testing.T, c Config) {
			assert.True(t, c.MCP)
		}, ""},
		{"target localhost", []string{"-target", "http://localhost:1/"}, nil, ""},
		{"protocol implies mcp", []string{"-protocol", "2026-07-28"}, func(t *testing.T, c Config) {
			assert.True(t, c.MCP)
			assert.Equal(t, ProtocolCurrent, c.Protocol)
		}, ""},
		{"protocol legacy", []string{"-mcp", "-protocol", "2025-11-25"}, func(t *testing.T, c Config) {
			assert.Equal(t, ProtocolLegacy, c.Protocol)
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
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
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
		assert.Equal(t, ExitUsage, code, "%v", args)
		assert.Contains(t, errOut.String(), UsageLine)
		assert.Empty(t, out.String(), "no run, no report")
	}
}

func TestMainHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitOK, Main([]string{"-h"}, &out, &errOut))
	for _, f := range []string{"-resolvers", "-consumers", "-names", "-cap", "-mix", "-duration", "-ops", "-seed", "-json", "-mcp", "-target"} {
		assert.Regexp(t, `(?m)^  `+f+`\b.*\n\s+\S`, out.String(), "-h does not document %s", f)
	}
}

// A short clean run through Main: exit 0, the text report, and the JSON
// report with every key the README documents.
func TestMainJSONReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	var out, errOut bytes.Buffer
	code := Main([]string{"-duration", "400ms", "-seed", "7", "-json", path}, &out, &errOut)
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "PASS: 0 violations")
	assert.Empty(t, errOut.String(), "no progress line when stderr is not a terminal")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"violations", "deaths", "ops", "takeovers", "cap_rejections", "duration_s", "seed"} {
		assert.Contains(t, m, k)
	}
	assert.EqualValues(t, 7, m["seed"])
	viol := m["violations"].(map[string]any)
	assert.Len(t, viol, len(Invariants))
	for _, inv := range Invariants {
		assert.Contains(t, viol, inv.String(), "every invariant is present, even at 0")
	}
	deaths := m["deaths"].(map[string]any)
	for _, k := range []string{"stop", "cancel", "panic", "drop"} {
		assert.Contains(t, deaths, k)
	}
	ops := m["ops"].(map[string]any)
	require.Contains(t, ops, "call")
	for _, k := range []string{"count", "ops_per_sec", "p50_ns", "p99_ns", "p999_ns", "max_ns"} {
		assert.Contains(t, ops["call"], k)
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
	assert.Equal(t, ExitViolations, code)
	assert.Contains(t, out.String(), "VIOLATION unauthenticated_body: ")
	assert.Contains(t, out.String(), "FAIL: ")
	assert.True(t, strings.Contains(out.String(), `"unauthenticated_body": `), "JSON on stdout with -json -")
}
