package fleetload

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/livereg/livereg/internal/loadgen"
)

// Report is what a fleet run saw. Its JSON form is what -json writes.
type Report struct {
	Seed        uint64  `json:"seed"`
	DurationS   float64 `json:"duration_s"` // the load phase, wind-down excluded
	Interrupted bool    `json:"interrupted"`
	Mode        string  `json:"mode"` // "fleet"
	Config      struct {
		Fleet      int     `json:"fleet"`
		Consumers  int     `json:"consumers"`
		Resolvers  int     `json:"resolvers"`
		Names      int     `json:"names"`
		TTLS       float64 `json:"ttl_s"`
		ChaosEvery float64 `json:"chaos_every_s"`
		Etcd       string  `json:"etcd"` // "embedded" or the URLs
	} `json:"config"`

	// Ops maps call_local, call_forward, list, start and stop to their
	// count and latency, as internal/loadgen's report does. call_local and
	// call_forward count successful tools/calls only, by whether the
	// replica called held the route.
	Ops map[string]loadgen.OpStats `json:"ops"`
	// ForwardOverheadP50 is quiet_call_forward's p50 less
	// quiet_call_local's, in ns, measured with churn stopped, one call at
	// a time; LoadedOverheadP50 the same of call_forward and call_local,
	// measured under the load. ForwardTargetMet: ForwardOverheadP50 is at
	// most ForwardTarget.
	ForwardOverheadP50 int64 `json:"forward_overhead_p50_ns"`
	LoadedOverheadP50  int64 `json:"loaded_forward_overhead_p50_ns"`
	ForwardTargetMet   bool  `json:"forward_target_met"`

	Starts       int64            `json:"starts"`
	Claims       int64            `json:"claims"` // starts that claimed their name
	ClaimsPerSec float64          `json:"claims_per_sec"`
	Duplicates   int64            `json:"duplicates"`
	Refused      int64            `json:"refused_between_sessions"`
	LateStops    int64            `json:"late_stops"`
	Deaths       map[string]int64 `json:"deaths"`
	CallOutcomes map[string]int64 `json:"call_outcomes"`

	Crashes       int64 `json:"crashes"`
	SessionLosses struct {
		Revoked  int64 `json:"revoked"`
		Cut      int64 `json:"cut"`
		Observed int64 `json:"observed"` // sessions the replicas lost, however
	} `json:"session_losses"`
	// ConvergenceNs is how long after churn stopped every replica listed
	// the same (-1: never); SettledNs how long until that listing was the
	// live consumers' routes.
	ConvergenceNs int64 `json:"convergence_ns"`
	SettledNs     int64 `json:"settled_ns"`
	// CrashFreeNs is, for each crash probe, how long after the crash its
	// name was claimed on another replica.
	CrashFreeNs []int64 `json:"crash_free_ns"`
	// CrashLeaseGoneNs is, for each crash probe, how long after the crash
	// etcd no longer had the crashed replica's lease (polled every 2 ms).
	CrashLeaseGoneNs []int64 `json:"crash_lease_gone_ns"`

	Violations        map[string]int64    `json:"violations"`
	Checks            map[string]int64    `json:"checks"`
	Inconclusive      map[string]int64    `json:"inconclusive"`
	ViolationExamples map[string][]string `json:"violation_examples,omitempty"`
	Errors            int64               `json:"errors"`
	ErrorExamples     []string            `json:"error_examples,omitempty"`
}

// TotalViolations sums the violation counts.
func (r *Report) TotalViolations() int64 {
	var n int64
	for _, v := range r.Violations {
		n += v
	}
	return n
}

// Failed reports whether the run must exit non-zero.
func (r *Report) Failed() bool { return r.TotalViolations() > 0 || r.Errors > 0 }

func (w *world) report(elapsed time.Duration, interrupted bool, conv, settled time.Duration) *Report {
	r := &Report{Seed: w.cfg.Seed, DurationS: elapsed.Seconds(), Interrupted: interrupted, Mode: "fleet",
		Ops: map[string]loadgen.OpStats{}, Deaths: map[string]int64{}, CallOutcomes: map[string]int64{},
		Violations: map[string]int64{}, Checks: map[string]int64{}, Inconclusive: map[string]int64{}}
	c := &r.Config
	c.Fleet, c.Consumers, c.Resolvers, c.Names = w.cfg.Fleet, w.cfg.Consumers, w.cfg.Resolvers, w.cfg.Names
	c.TTLS, c.ChaosEvery = w.cfg.TTL.Seconds(), w.cfg.ChaosEvery.Seconds()
	c.Etcd = "embedded"
	if len(w.cfg.Etcd) > 0 {
		c.Etcd = strings.Join(w.cfg.Etcd, ",")
	}
	for o := range numOps {
		r.Ops[o.String()] = opStats(w.lat.snapshot(o), elapsed)
	}
	if l, f := r.Ops[opCallLocal.String()], r.Ops[opCallForward.String()]; l.Count > 0 && f.Count > 0 {
		r.LoadedOverheadP50 = f.P50 - l.P50
	}
	if l, f := r.Ops[opQuietLocal.String()], r.Ops[opQuietForward.String()]; l.Count > 0 && f.Count > 0 {
		r.ForwardOverheadP50 = f.P50 - l.P50
		r.ForwardTargetMet = r.ForwardOverheadP50 <= int64(ForwardTarget)
	}
	r.Starts, r.Claims, r.Duplicates, r.Refused, r.LateStops = w.starts.Load(), w.claimsWon.Load(), w.duplicates.Load(), w.startRefused.Load(), w.lateStops.Load()
	if elapsed > 0 {
		r.ClaimsPerSec = float64(r.Claims) / elapsed.Seconds()
	}
	for s := range numShapes {
		r.Deaths[s.String()] = w.deaths[s].Load()
	}
	for o := range numOutcomes {
		r.CallOutcomes[o.String()] = w.outcomes[o].Load()
	}
	r.Crashes = w.crashes.Load()
	r.SessionLosses.Revoked, r.SessionLosses.Cut = w.revokeLosses.Load(), w.cutLosses.Load()
	w.f.mu.Lock()
	for _, rep := range w.f.all {
		r.SessionLosses.Observed += int64(rep.rep.SessionsLost())
	}
	w.f.mu.Unlock()
	r.ConvergenceNs, r.SettledNs = int64(conv), int64(settled)
	w.freeMu.Lock()
	for i, d := range w.freeTimes {
		r.CrashFreeNs = append(r.CrashFreeNs, int64(d))
		r.CrashLeaseGoneNs = append(r.CrashLeaseGoneNs, int64(w.leaseTimes[i]))
	}
	w.freeMu.Unlock()
	for _, inv := range Invariants {
		r.Violations[inv.String()] = w.t.Violations(inv)
		r.Checks[inv.String()] = w.t.Checks(inv)
		r.Inconclusive[inv.String()] = w.t.inconclusive[inv].Load()
		if ex := w.t.examplesOf(inv); len(ex) > 0 {
			if r.ViolationExamples == nil {
				r.ViolationExamples = map[string][]string{}
			}
			r.ViolationExamples[inv.String()] = ex
		}
	}
	r.Errors, r.ErrorExamples = w.t.errors.Load(), w.t.errorMessages()
	return r
}

func opStats(h *hdrhistogram.Histogram, elapsed time.Duration) loadgen.OpStats {
	s := loadgen.OpStats{Count: h.TotalCount()}
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

// WriteText writes the human report.
func (r *Report) WriteText(out io.Writer) {
	fmt.Fprintf(out, "loadgen: fleet of %d replicas over %s etcd, TTL %gs, %d consumers, %d resolvers, %d names, seed %d\n",
		r.Config.Fleet, r.Config.Etcd, r.Config.TTLS, r.Config.Consumers, r.Config.Resolvers, r.Config.Names, r.Seed)
	status := "ran"
	if r.Interrupted {
		status = "interrupted after"
	}
	fmt.Fprintf(out, "%s %.2fs\n\n", status, r.DurationS)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tcount\tops/s\tp50\tp90\tp99\tp99.9\tmax\t")
	for o := range numOps {
		s := r.Ops[o.String()]
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", o, s.Count, s.OpsPerSec, fmtNs(s.P50), fmtNs(s.P90), fmtNs(s.P99), fmtNs(s.P999), fmtNs(s.Max))
	}
	tw.Flush()
	switch {
	case r.Ops[opQuietForward.String()].Count == 0:
		fmt.Fprintf(out, "\nforward overhead: not measured (it takes two replicas up at the end)\n")
	default:
		met := "met"
		if !r.ForwardTargetMet {
			met = "NOT met"
		}
		fmt.Fprintf(out, "\nforward overhead at p50, churn stopped: %s (forwarded %s, local %s; target %s %s); under load: %s\n",
			fmtNs(r.ForwardOverheadP50), fmtNs(r.Ops[opQuietForward.String()].P50), fmtNs(r.Ops[opQuietLocal.String()].P50),
			fmtNs(int64(ForwardTarget)), met, fmtNs(r.LoadedOverheadP50))
	}
	fmt.Fprintf(out, "claims: %d of %d starts (%.0f/s), %d duplicates, %d refused between sessions, %d late stops\n",
		r.Claims, r.Starts, r.ClaimsPerSec, r.Duplicates, r.Refused, r.LateStops)
	fmt.Fprintf(out, "deaths: %s\n", fmtCounts(r.Deaths, shapeNames[:]))
	fmt.Fprintf(out, "call outcomes: %s\n", fmtCounts(r.CallOutcomes, outcomeNames[:]))
	fmt.Fprintf(out, "failures: %d crashes, %d leases revoked, %d cuts from etcd; %d sessions lost in all\n",
		r.Crashes, r.SessionLosses.Revoked, r.SessionLosses.Cut, r.SessionLosses.Observed)
	free := make([]string, len(r.CrashFreeNs))
	for i, d := range r.CrashFreeNs {
		free[i] = fmtNs(d)
		if i < len(r.CrashLeaseGoneNs) {
			free[i] += " (lease gone " + fmtNs(r.CrashLeaseGoneNs[i]) + ")"
		}
	}
	fmt.Fprintf(out, "crashed replicas' names claimed elsewhere after: [%s]\n", strings.Join(free, ", "))
	fmt.Fprintf(out, "listings the same %s after churn stopped, the live routes after %s\n\n", fmtNs(r.ConvergenceNs), fmtNs(r.SettledNs))

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "invariant\tchecks\tinconclusive\tviolations")
	for _, inv := range Invariants {
		fmt.Fprintf(tw, "%d %s\t%d\t%d\t%d\n", inv.Number(), inv, r.Checks[inv.String()], r.Inconclusive[inv.String()], r.Violations[inv.String()])
	}
	tw.Flush()
	for _, inv := range Invariants {
		for _, ex := range r.ViolationExamples[inv.String()] {
			fmt.Fprintf(out, "VIOLATION %s: %s\n", inv, ex)
		}
	}
	for _, ex := range r.ErrorExamples {
		fmt.Fprintf(out, "ERROR: %s\n", ex)
	}
	switch {
	case r.Failed():
		fmt.Fprintf(out, "\nFAIL: %d violations, %d errors\n", r.TotalViolations(), r.Errors)
	case r.Interrupted:
		fmt.Fprintf(out, "\nINCOMPLETE: interrupted after %.2fs; 0 violations so far\n", r.DurationS)
	default:
		fmt.Fprintf(out, "\nPASS: 0 violations\n")
	}
}

func fmtCounts(m map[string]int64, order []string) string {
	var parts []string
	for _, k := range order {
		if n := m[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func fmtNs(ns int64) string {
	if ns < 0 {
		return "-" + fmtNs(-ns)
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
