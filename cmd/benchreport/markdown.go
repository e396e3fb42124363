package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// base is the implementation every ratio is taken against.
const base = "livereg"

// memoryUnit is what BenchmarkMemory reports; its ns/op is a fill time,
// not a comparison, so it gets a table of its own and no bars.
const memoryUnit = "B/entry"

func writeMarkdown(w io.Writer, r *results, command string) error {
	var b strings.Builder
	b.WriteString("## Benchmark results\n\n")
	if cpu := r.config["cpu"]; cpu != "" {
		fmt.Fprintf(&b, "Machine: %s, %s/%s. ", cpu, r.config["goos"], r.config["goarch"])
	}
	fmt.Fprintf(&b, "GOMAXPROCS: %s.", joinInts(r.cpus))
	if command != "" {
		fmt.Fprintf(&b, " Command: `%s`.", command)
	}
	b.WriteString(" Every figure is a ratio of medians from this one run; absolute times on a shared machine are not evidence.\n\n")

	b.WriteString("### Goals\n\n")
	b.WriteString("| Goal | -cpu | Measured | Target | Met |\n|---|---|---|---|---|\n")
	for _, v := range judge(r) {
		if !slices.Contains(r.workloads, v.goal.num.workload) {
			continue // a focused run: the goal is about cases it did not run
		}
		measured, target, met := "no data", "", "no data"
		if v.goal.cmp != "" {
			target = v.goal.cmp + " " + fmtLimit(v.goal)
		}
		if v.ok {
			measured = fmtMeasured(v)
			switch {
			case v.goal.cmp == "":
				met = "report"
			case v.met:
				met = "yes"
			default:
				met = "**no**"
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", v.goal.text, v.cpu, measured, target, met)
	}

	others := withoutBase(r.impls)
	b.WriteString("\n### livereg against each implementation\n\n")
	b.WriteString("Each implementation's cell is its median ns/op divided by livereg's: above 1, livereg is faster by that factor; below 1, slower. Floors do no owner checks and are expected below 1.\n\n")
	b.WriteString("| Workload | -cpu | livereg ns/op | livereg allocs/op |")
	for _, impl := range others {
		fmt.Fprintf(&b, " %s |", impl)
	}
	b.WriteString("\n|---|---|---|---|" + strings.Repeat("---|", len(others)) + "\n")
	for _, wl := range r.workloads {
		for _, cpu := range r.cpus {
			if !r.has(wl, cpu) || isMemory(r, wl, cpu) {
				continue
			}
			baseKey := key{wl, cpu, base}
			ns, okNs := r.median(baseKey, nsOp)
			allocs, okAllocs := r.median(baseKey, allocsOp)
			fmt.Fprintf(&b, "| %s | %d | %s | %s |", wl, cpu, orDash(okNs, fmtNs(ns)), orDash(okAllocs, fmt.Sprintf("%.0f", allocs)))
			for _, impl := range others {
				ratio, ok := r.ratio(key{wl, cpu, impl}, baseKey, nsOp)
				fmt.Fprintf(&b, " %s |", orDash(ok, fmtRatio(ratio)))
			}
			b.WriteString("\n")
		}
	}

	for _, wl := range r.workloads {
		for _, cpu := range r.cpus {
			if !isMemory(r, wl, cpu) {
				continue
			}
			fmt.Fprintf(&b, "\n### Memory: %s, -cpu %d\n\n| Implementation | %s |\n|---|---|\n", wl, cpu, memoryUnit)
			for _, impl := range r.impls {
				if v, ok := r.median(key{wl, cpu, impl}, memoryUnit); ok {
					fmt.Fprintf(&b, "| %s | %.1f |\n", impl, v)
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func isMemory(r *results, wl string, cpu int) bool {
	for _, impl := range r.impls {
		if _, ok := r.samples[key{wl, cpu, impl}][memoryUnit]; ok {
			return true
		}
	}
	return false
}

func withoutBase(impls []string) []string {
	var out []string
	for _, impl := range impls {
		if impl != base {
			out = append(out, impl)
		}
	}
	return out
}

func fmtMeasured(v verdict) string {
	if v.goal.diff {
		return fmtDiff(v.value, v.goal.unit)
	}
	if v.goal.den.impl == "" {
		return fmt.Sprintf("%g", v.value)
	}
	return fmtRatio(v.value)
}

func fmtLimit(g goal) string {
	if g.diff {
		return fmtDiff(g.limit, g.unit)
	}
	if g.den.impl == "" {
		return fmt.Sprintf("%g", g.limit)
	}
	return fmt.Sprintf("%gx", g.limit)
}

// fmtDiff formats a difference in unit: nanoseconds as signed
// microseconds.
func fmtDiff(x float64, unit string) string {
	if strings.HasSuffix(unit, "-ns") || unit == "ns/op" {
		return fmt.Sprintf("%+.0f µs", x/1e3)
	}
	return fmt.Sprintf("%+g %s", x, unit)
}

// fmtRatio keeps about three significant digits.
func fmtRatio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	case x >= 0.1:
		return fmt.Sprintf("%.2fx", x)
	default:
		return fmt.Sprintf("%.2gx", x)
	}
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.1f ns", ns)
	}
}

func orDash(ok bool, s string) string {
	if !ok || strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		return "–"
	}
	return s
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// log10Floor and log10Ceil bound a value by decades, for the chart's axes.
func log10Floor(x float64) float64 { return math.Floor(math.Log10(x)) }
func log10Ceil(x float64) float64  { return math.Ceil(math.Log10(x)) }
