package latency

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0ns"},
		{999, "999ns"},
		{1000, "1.0µs"},
		{1549, "1.5µs"},
		{999_949, "999.9µs"},
		{1_000_000, "1.00ms"},
		{12_345_678, "12.35ms"},
		{999_990_000, "999.99ms"},
		{int64(time.Second), "1.00s"},
		{int64(90 * time.Second), "90.00s"},
		{-777, "-777ns"},
		{-2_310_000, "-2.31ms"},
	}
	for _, tt := range tests {
		if got := Format(tt.ns); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}

func TestRecordClamps(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		wantMax int64
	}{
		{"zero counts as the minimum", 0, Min},
		{"negative counts as the minimum", -time.Second, Min},
		{"in range", 5 * time.Millisecond, int64(5 * time.Millisecond)},
		{"slower than the range counts at its top", time.Hour, Max},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New()
			Record(h, tt.d)
			if h.TotalCount() != 1 {
				t.Fatalf("count = %d, want 1: a sample out of range must still count", h.TotalCount())
			}
			if !h.ValuesAreEquivalent(h.Max(), tt.wantMax) {
				t.Errorf("recorded %d, want about %d", h.Max(), tt.wantMax)
			}
		})
	}
}

func TestStatsOf(t *testing.T) {
	tests := []struct {
		name    string
		samples []time.Duration
		elapsed time.Duration
		want    Stats // percentiles compared within the histogram's precision
	}{
		{"empty", nil, time.Second, Stats{}},
		{"no elapsed time, no rate", []time.Duration{time.Millisecond}, 0,
			Stats{Count: 1, P50: 1e6, P90: 1e6, P99: 1e6, P999: 1e6, Max: 1e6}},
		{"1 to 1000 µs over 2 s", func() []time.Duration {
			var s []time.Duration
			for i := 1; i <= 1000; i++ {
				s = append(s, time.Duration(i)*time.Microsecond)
			}
			return s
		}(), 2 * time.Second, Stats{Count: 1000, OpsPerSec: 500, P50: 500e3, P90: 900e3, P99: 990e3, P999: 999e3, Max: 1000e3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New()
			for _, d := range tt.samples {
				Record(h, d)
			}
			got := StatsOf(h, tt.elapsed)
			if got.Count != tt.want.Count || math.Abs(got.OpsPerSec-tt.want.OpsPerSec) > 1e-9 {
				t.Errorf("count %d at %v/s, want %d at %v/s", got.Count, got.OpsPerSec, tt.want.Count, tt.want.OpsPerSec)
			}
			for _, p := range []struct {
				name      string
				got, want int64
			}{{"p50", got.P50, tt.want.P50}, {"p90", got.P90, tt.want.P90}, {"p99", got.P99, tt.want.P99}, {"p99.9", got.P999, tt.want.P999}, {"max", got.Max, tt.want.Max}} {
				if !h.ValuesAreEquivalent(p.got, p.want) {
					t.Errorf("%s = %d, want about %d", p.name, p.got, p.want)
				}
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	ops := map[string]Stats{
		"call":  {Count: 1234567, OpsPerSec: 411522.4, P50: 601, P90: 1400, P99: 3400, P999: 34_800, Max: 5_200_000},
		"start": {Count: 9, OpsPerSec: 3, P50: 23_700, P90: 75_000, P99: 584_700, P999: 1_680_000, Max: int64(time.Second)},
	}
	tests := []struct {
		name  string
		order []string
		want  string
	}{
		{"in order, right-aligned", []string{"start", "call"}, "" +
			"     op    count   ops/s     p50     p90      p99   p99.9     max\n" +
			"  start        9       3  23.7µs  75.0µs  584.7µs  1.68ms   1.00s\n" +
			"   call  1234567  411522   601ns   1.4µs    3.4µs  34.8µs  5.20ms\n"},
		{"a name without stats gets zeros", []string{"call", "late_stop"}, "" +
			"         op    count   ops/s    p50    p90    p99   p99.9     max\n" +
			"       call  1234567  411522  601ns  1.4µs  3.4µs  34.8µs  5.20ms\n" +
			"  late_stop        0       0    0ns    0ns    0ns     0ns     0ns\n"},
		{"no rows", nil, "  op  count  ops/s  p50  p90  p99  p99.9  max\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			WriteTable(&b, tt.order, ops)
			if b.String() != tt.want {
				t.Errorf("wrote\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
