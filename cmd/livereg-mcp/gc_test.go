package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGCFlags: -gc-percent defaults to 400 and -memory-limit-mib to none;
// a limit is whole MiB, positive, and a bad one is refused.
func TestGCFlags(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := parseArgs(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.gcPercent != 400 || cfg.memoryLimitBytes != 0 {
		t.Errorf("defaults: gcPercent %d, memoryLimitBytes %d; want 400, 0", cfg.gcPercent, cfg.memoryLimitBytes)
	}
	cfg, err = parseArgs([]string{"-gc-percent", "-1", "-memory-limit-mib", "512"}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.gcPercent != -1 || cfg.memoryLimitBytes != 512<<20 {
		t.Errorf("parsed: gcPercent %d, memoryLimitBytes %d; want -1, %d", cfg.gcPercent, cfg.memoryLimitBytes, 512<<20)
	}
	for _, bad := range []string{"0", "-5", "1.5", "1GiB", "2000000000000"} {
		_, err := parseArgs([]string{"-memory-limit-mib", bad}, none, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-memory-limit-mib") {
			t.Errorf("-memory-limit-mib %s: err = %v, want one naming the flag", bad, err)
		}
	}
}

// TestApplyGC: the flags set the collector unless the environment already
// did, as the Go runtime reads $GOGC and $GOMEMLIMIT at start.
func TestApplyGC(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		cfg       gcConfig
		wantGC    []int
		wantLimit []int64
	}{
		{"flags", nil, gcConfig{gcPercent: 400, memoryLimitBytes: 1 << 30}, []int{400}, []int64{1 << 30}},
		{"no limit", nil, gcConfig{gcPercent: 400}, []int{400}, nil},
		{"GOGC set", map[string]string{"GOGC": "100"}, gcConfig{gcPercent: 400, memoryLimitBytes: 1 << 30}, nil, []int64{1 << 30}},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "2GiB"}, gcConfig{gcPercent: 200, memoryLimitBytes: 1 << 30}, []int{200}, nil},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "2GiB"}, gcConfig{gcPercent: 200, memoryLimitBytes: 1 << 30}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotGC []int
			var gotLimit []int64
			applyGC(tt.cfg, func(k string) string { return tt.env[k] },
				func(p int) int { gotGC = append(gotGC, p); return 100 },
				func(b int64) int64 { gotLimit = append(gotLimit, b); return 0 })
			if !slices.Equal(gotGC, tt.wantGC) || !slices.Equal(gotLimit, tt.wantLimit) {
				t.Errorf("SetGCPercent%v SetMemoryLimit%v; want %v %v", gotGC, gotLimit, tt.wantGC, tt.wantLimit)
			}
		})
	}
}

// TestListTTLFlag: -list-ttl reaches the server's options; negative is refused.
func TestListTTLFlag(t *testing.T) {
	none := func(string) string { return "" }
	cfg, err := parseArgs([]string{"-list-ttl", "90s"}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := serverOptions(cfg, nil, nil).ListTTL; got != 90*time.Second {
		t.Errorf("ListTTL = %v, want 90s", got)
	}
	if _, err := parseArgs([]string{"-list-ttl", "-1s"}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "-list-ttl") {
		t.Errorf("-list-ttl -1s: %v, want an error naming the flag", err)
	}
}
