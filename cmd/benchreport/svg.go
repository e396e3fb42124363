package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// palette is the Okabe-Ito set, readable by colour-blind readers; livereg,
// listed first in every run, gets the first colour.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#999999", "#56B4E9", "#000000"}

// Chart geometry, in SVG user units.
const (
	cols     = 3
	panelW   = 380
	panelH   = 230
	legendH  = 70
	marginL  = 62
	marginR  = 10
	marginT  = 30
	marginB  = 28
	gapPanel = 12
)

// writeSVG draws one panel per workload: ns/op of each implementation,
// grouped by -cpu, on a log scale, since the implementations differ by
// orders of magnitude. Every bar carries a tooltip with its exact median.
func writeSVG(w io.Writer, r *results) error {
	var panels []string
	for _, wl := range r.workloads {
		if !isMemoryAny(r, wl) {
			panels = append(panels, wl)
		}
	}
	rows := (len(panels) + cols - 1) / cols
	width := cols*(panelW+gapPanel) + gapPanel
	height := legendH + rows*(panelH+gapPanel) + gapPanel
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">ns/op by implementation and -cpu (log scale, lower is faster)</text>`+"\n", gapPanel)
	for i, impl := range r.impls {
		x := gapPanel + i*130
		fmt.Fprintf(&b, `<rect x="%d" y="36" width="12" height="12" fill="%s"/><text x="%d" y="46">%s</text>`+"\n", x, color(i), x+16, esc(impl))
	}
	for i, wl := range panels {
		x := gapPanel + (i%cols)*(panelW+gapPanel)
		y := legendH + gapPanel + (i/cols)*(panelH+gapPanel)
		drawPanel(&b, r, wl, x, y)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func drawPanel(b *strings.Builder, r *results, wl string, x0, y0 int) {
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`+"\n", x0, y0)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="none" stroke="#ccc"/>`+"\n", panelW, panelH)
	fmt.Fprintf(b, `<text x="6" y="16" font-weight="bold">%s</text>`+"\n", esc(wl))

	var cpus []int
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cpu := range r.cpus {
		if !r.has(wl, cpu) {
			continue
		}
		cpus = append(cpus, cpu)
		for _, impl := range r.impls {
			if v, ok := r.median(key{wl, cpu, impl}, nsOp); ok && v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if len(cpus) == 0 || math.IsInf(lo, 1) {
		b.WriteString("</g>\n")
		return
	}
	dlo, dhi := log10Floor(lo), log10Ceil(hi)
	if dhi <= dlo {
		dhi = dlo + 1
	}
	plotW := float64(panelW - marginL - marginR)
	plotH := float64(panelH - marginT - marginB)
	yOf := func(v float64) float64 {
		return float64(marginT) + plotH*(1-(math.Log10(v)-dlo)/(dhi-dlo))
	}
	for d := dlo; d <= dhi; d++ {
		y := yOf(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/>`+"\n", marginL, panelW-marginR, y, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", marginL-4, y+4, fmtDecade(int(d)))
	}
	groupW := plotW / float64(len(cpus))
	barW := groupW * 0.8 / float64(len(r.impls))
	for gi, cpu := range cpus {
		gx := float64(marginL) + groupW*float64(gi) + groupW*0.1
		for ii, impl := range r.impls {
			v, ok := r.median(key{wl, cpu, impl}, nsOp)
			if !ok || v <= 0 {
				continue
			}
			top := yOf(v)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, -cpu %d: %s/op</title></rect>`+"\n",
				gx+barW*float64(ii), top, barW*0.92, float64(marginT)+plotH-top, color(ii), esc(impl), cpu, esc(fmtNs(v)))
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">-cpu %d</text>`+"\n", gx+groupW*0.4, panelH-10, cpu)
	}
	b.WriteString("</g>\n")
}

func isMemoryAny(r *results, wl string) bool {
	for _, cpu := range r.cpus {
		if isMemory(r, wl, cpu) {
			return true
		}
	}
	return false
}

// fmtDecade labels the axis line at 10^d nanoseconds.
func fmtDecade(d int) string {
	units := []string{"ns", "µs", "ms", "s"}
	i := min(max(d, 0)/3, len(units)-1)
	v := math.Pow(10, float64(d-3*i))
	return fmt.Sprintf("%g %s", v, units[i])
}

func color(i int) string { return palette[i%len(palette)] }

func esc(s string) string { return html.EscapeString(s) }
