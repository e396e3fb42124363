package inproc

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// Report is what a run saw. Its JSON form is what -json writes; the keys
// are a contract with scripts and CI (see the README).
type Report struct {
	report.Head // Mode: "in-process", or "mcp: " and the server
	Config      struct {
		Resolvers   int    `json:"resolvers"`
		Consumers   int    `json:"consumers"`
		Names       int    `json:"names"`
		Cap         int    `json:"cap"`
		Mix         string `json:"mix"`
		MissingPlan string `json:"missing_plan"`
		Target      string `json:"target,omitempty"`
	} `json:"config"`

	// Ops maps an operation kind (call, get, read, list, start, stop,
	// late_stop, and in MCP mode mcp_call, mcp_get, mcp_read, mcp_list) to its count and
	// latency. list counts listings of every kind, start starts of every
	// kind.
	Ops map[string]OpStats `json:"ops"`

	Starts int64 `json:"starts"`
	// KindStarts maps tool, prompt, template and resource to the starts of
	// that kind.
	KindStarts    map[string]int64 `json:"kind_starts"`
	Takeovers     int64            `json:"takeovers"` // starts on a name whose last holder crashed
	CapRejections int64            `json:"cap_rejections"`
	Duplicates    int64            `json:"duplicates"`
	// Deaths maps stop, cancel, panic and drop to how many consumers died
	// that way; every key is present.
	Deaths           map[string]int64 `json:"deaths"`
	UnexpectedDeaths int64            `json:"unexpected_deaths"`
	LateStops        int64            `json:"late_stops"`
	LateStopChecks   int64            `json:"late_stop_checks"`
	CallOutcomes     map[string]int64 `json:"call_outcomes"`
	MCPCallOutcomes  map[string]int64 `json:"mcp_call_outcomes,omitempty"` // MCP calls, gets and reads
	GetOutcomes      map[string]int64 `json:"get_outcomes"`                // prompt gets
	ReadOutcomes     map[string]int64 `json:"read_outcomes"`               // reads of templated URIs
	ResourceOutcomes map[string]int64 `json:"resource_read_outcomes"`      // reads of fixed resources
	// UpdatesPublished and UpdatesRefused count the fixed-resource
	// consumers' Updated calls that succeeded and that were refused
	// (ErrDeadOwner: the consumer had died).
	UpdatesPublished int64 `json:"updates_published"`
	UpdatesRefused   int64 `json:"updates_refused"`
	UncheckedListed  int64 `json:"unchecked_listed"`

	report.Findings

	Goroutines ResourceStats `json:"goroutines"`
	HeapLive   ResourceStats `json:"heap_live_bytes"`
}

// OpStats is one operation kind's count and latency in nanoseconds.
type OpStats = latency.Stats

// ResourceStats is a resource before, at its peak during, and after a run.
type ResourceStats struct {
	Baseline uint64 `json:"baseline"`
	Peak     uint64 `json:"peak"`
	End      uint64 `json:"end"`
}

// Verdict is what decides how the run ends: its violations and unexpected
// errors, and whether a signal cut it short.
func (r *Report) Verdict() report.Verdict { return r.Findings.Verdict(r.Head) }

func (w *world) report(elapsed time.Duration, interrupted bool, hists map[op]*hdrhistogram.Histogram) *Report {
	r := &Report{
		Head:   report.Head{Seed: w.cfg.Seed, DurationS: elapsed.Seconds(), Interrupted: interrupted, Mode: "in-process"},
		Ops:    map[string]OpStats{},
		Deaths: map[string]int64{},
	}
	r.Config.Resolvers, r.Config.Consumers, r.Config.Names, r.Config.Cap = w.cfg.Resolvers, w.cfg.Consumers, w.cfg.Names, w.cfg.Cap
	r.Config.Mix, r.Config.MissingPlan, r.Config.Target = w.cfg.Mix.String(), w.cfg.MissingPlan.String(), w.cfg.Target
	for o, h := range hists {
		r.Ops[o.String()] = latency.StatsOf(h, elapsed)
	}
	r.Starts, r.Takeovers, r.CapRejections, r.Duplicates = w.starts.Load(), w.takeovers.Load(), w.capRejections.Load(), w.duplicates.Load()
	for sh := shapeStop; sh <= shapeDrop; sh++ {
		r.Deaths[sh.String()] = w.deaths[sh].Load()
	}
	r.UnexpectedDeaths = w.deaths[shapeUnexpected].Load()
	r.LateStops, r.LateStopChecks = w.lateStops.Load(), w.lateChecks.Load()
	r.CallOutcomes, r.GetOutcomes, r.ReadOutcomes, r.KindStarts = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	r.ResourceOutcomes = map[string]int64{}
	r.UpdatesPublished, r.UpdatesRefused = w.updatesPublished.Load(), w.updatesRefused.Load()
	for o := range numOutcomes {
		r.CallOutcomes[o.String()] = w.outcomes[o].Load()
		r.GetOutcomes[o.String()] = w.kindOutcomes[kindPrompt][o].Load()
		r.ReadOutcomes[o.String()] = w.kindOutcomes[kindTemplate][o].Load()
		r.ResourceOutcomes[o.String()] = w.kindOutcomes[kindResource][o].Load()
	}
	for k := range numKinds {
		r.KindStarts[k.String()] = w.kindStarts[k].Load()
	}
	if w.cfg.MCP {
		r.MCPCallOutcomes = map[string]int64{}
		for o := range numOutcomes {
			r.MCPCallOutcomes[o.String()] = w.mcpOutcomes[o].Load()
		}
	}
	r.UncheckedListed = w.unchecked.Load()
	r.Violations, r.Checks, r.ViolationExamples = w.t.Summary(Invariants)
	r.Errors, r.ErrorExamples = w.t.Errors(), w.t.ErrorExamples()
	base, peak, end := w.growth.summary()
	r.Goroutines = ResourceStats{uint64(base.Goroutines), uint64(peak.Goroutines), uint64(end.Goroutines)}
	r.HeapLive = ResourceStats{base.HeapLive, peak.HeapLive, end.HeapLive}
	return r
}

// opOrder is the order ops are printed in.
var opOrder = []string{"call", "mcp_call", "get", "mcp_get", "read", "mcp_read", "list", "mcp_list", "start", "stop", "late_stop"}

// WriteText writes the human report.
func (r *Report) WriteText(out io.Writer) {
	fmt.Fprintf(out, "loadgen: %s, %d resolvers, %d consumers, %d names, cap %d, missing plan %s, seed %d\n",
		r.Mode, r.Config.Resolvers, r.Config.Consumers, r.Config.Names, r.Config.Cap, r.Config.MissingPlan, r.Seed)
	status := "ran"
	if r.Interrupted {
		status = "interrupted after"
	}
	fmt.Fprintf(out, "%s %.2fs; mix %s\n\n", status, r.DurationS, r.Config.Mix)

	measured := slices.DeleteFunc(slices.Clone(opOrder), func(name string) bool { _, ok := r.Ops[name]; return !ok })
	latency.WriteTable(out, measured, r.Ops)

	fmt.Fprintf(out, "\nconsumers: %d starts (%d tool, %d prompt, %d template, %d resource), %d takeovers, %d cap rejections, %d duplicates, %d late stops (%d checked)\n",
		r.Starts, r.KindStarts["tool"], r.KindStarts["prompt"], r.KindStarts["template"], r.KindStarts["resource"], r.Takeovers, r.CapRejections, r.Duplicates, r.LateStops, r.LateStopChecks)
	fmt.Fprintf(out, "deaths: stop %d, cancel %d, panic %d, drop %d", r.Deaths["stop"], r.Deaths["cancel"], r.Deaths["panic"], r.Deaths["drop"])
	if r.UnexpectedDeaths > 0 {
		fmt.Fprintf(out, ", unexpected %d", r.UnexpectedDeaths)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "call outcomes: %s\n", fmtOutcomes(r.CallOutcomes))
	fmt.Fprintf(out, "prompt get outcomes: %s\n", fmtOutcomes(r.GetOutcomes))
	fmt.Fprintf(out, "templated read outcomes: %s\n", fmtOutcomes(r.ReadOutcomes))
	fmt.Fprintf(out, "resource read outcomes: %s\n", fmtOutcomes(r.ResourceOutcomes))
	fmt.Fprintf(out, "resource updates: %d published, %d refused\n", r.UpdatesPublished, r.UpdatesRefused)
	if r.MCPCallOutcomes != nil {
		fmt.Fprintf(out, "mcp call, get and read outcomes: %s\n", fmtOutcomes(r.MCPCallOutcomes))
	}
	fmt.Fprintf(out, "goroutines: baseline %d, peak %d, end %d; live heap: baseline %s, peak %s, end %s\n\n",
		r.Goroutines.Baseline, r.Goroutines.Peak, r.Goroutines.End, fmtBytes(r.HeapLive.Baseline), fmtBytes(r.HeapLive.Peak), fmtBytes(r.HeapLive.End))

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "invariant\tchecks\tviolations")
	for i, inv := range Invariants {
		fmt.Fprintf(tw, "%d %s\t%d\t%d\n", i+1, inv, r.Checks[inv.String()], r.Violations[inv.String()])
	}
	tw.Flush()
	report.WriteEnd(out, Invariants, r.ViolationExamples, r.ErrorExamples, r.Verdict())
}

func fmtOutcomes(m map[string]int64) string { return report.Counts(m, outcomeNames[:]) }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(out io.Writer) error { return report.WriteJSON(out, r) }

func fmtBytes(b uint64) string {
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}
