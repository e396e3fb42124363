// Package latency is how both loadgen modes, the single-process one
// (inproc) and the fleet one (fleet), measure
// and print latency: HdrHistograms of one shape, samples clamped into
// their range, the percentiles a report gives of each, and the table it
// prints them in.
//
// The model: a histogram covers 1 ns to 60 s at 3 significant digits,
// about 200 KiB each; a sample outside that range is clamped to its edge
// and still counted, so that a report's count is every operation. The
// Histogram itself is not safe for concurrent use: a run keeps its
// histograms in a Book of Sets, one Set per worker goroutine, without a
// lock, or shared by many and locked, and merges them at the end.
package latency

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histograms' range and precision.
const (
	Min    = 1                       // ns
	Max    = int64(60 * time.Second) // ns
	Digits = 3                       // significant digits
)

// New returns an empty histogram of the shape Record and StatsOf expect.
func New() *hdrhistogram.Histogram { return hdrhistogram.New(Min, Max, Digits) }

// Record adds d to h, clamped to [Min, Max]. h must come from New and must
// not be used by another goroutine meanwhile.
func Record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(int64(d), Min), Max)) // in range by construction
}

// Stats is one operation kind's count and latency in nanoseconds, as
// both reports' JSON gives it.
type Stats struct {
	Count     int64   `json:"count"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       int64   `json:"p50_ns"`
	P90       int64   `json:"p90_ns"`
	P99       int64   `json:"p99_ns"`
	P999      int64   `json:"p999_ns"`
	Max       int64   `json:"max_ns"`
}

// StatsOf is h's count, its rate over elapsed (0 when elapsed is not
// positive), and its percentiles; all zero but the count when h is empty.
func StatsOf(h *hdrhistogram.Histogram, elapsed time.Duration) Stats {
	s := Stats{Count: h.TotalCount()}
	if s.Count == 0 {
		return s
	}
	if elapsed > 0 {
		s.OpsPerSec = float64(s.Count) / elapsed.Seconds()
	}
	s.P50, s.P90, s.P99, s.P999 = h.ValueAtQuantile(50), h.ValueAtQuantile(90), h.ValueAtQuantile(99), h.ValueAtQuantile(99.9)
	s.Max = h.Max()
	return s
}

// WriteTable writes a report's latency table: a header, then a row for
// each name in order, its count, rate and percentiles from ops (zeros for
// a name ops lacks), right-aligned.
func WriteTable(out io.Writer, order []string, ops map[string]Stats) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tcount\tops/s\tp50\tp90\tp99\tp99.9\tmax\t")
	for _, name := range order {
		s := ops[name]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", name, s.Count, s.OpsPerSec,
			Format(s.P50), Format(s.P90), Format(s.P99), Format(s.P999), Format(s.Max))
	}
	tw.Flush()
}

// Format writes ns for a report's tables: whole nanoseconds under 1 µs,
// then one decimal of µs, two of ms, two of s; a negative duration (a
// difference of two latencies) is the same with a minus sign.
func Format(ns int64) string {
	if ns < 0 {
		return "-" + Format(-ns)
	}
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
