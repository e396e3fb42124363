package fleet

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/latency"
	"github.com/livereg/livereg/cmd/internal/loadgen/report"
)

// Report is what a fleet run saw. Its JSON form is what -json writes.
type Report struct {
	report.Head // Mode: "fleet"
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
	// count and latency, as inproc's report does. call_local and
	// call_forward count successful tools/calls only, by whether the
	// replica called held the route.
	Ops map[string]latency.Stats `json:"ops"`
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
	// Tasks counts the tasks the taskers started and how they ended, as
	// read through replicas other than the holder, and the retryable
	// peer_unavailable answers those reads got (tasks.go).
	Tasks struct {
		Started     int64 `json:"started"`
		Completed   int64 `json:"completed"`
		FailedGone  int64 `json:"failed_consumer_died"`
		FailedLost  int64 `json:"failed_replica_lost"`
		Unavailable int64 `json:"retryable_unavailable_reads"`
	} `json:"tasks"`

	// Surface counts the other kinds of route: starts and claims by kind,
	// prompt gets and templated reads by outcome, resource updates, and
	// progress calls (surface.go, subs.go, progress.go).
	Surface SurfaceReport `json:"surface"`

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

	// Forge is what the forger wrote and what reached its trap; absent
	// with -forge=false.
	Forge *ForgeReport `json:"forge,omitempty"`

	report.Findings
	// Inconclusive maps every invariant's name to its suspect cases that a
	// lost session explains, zeros included.
	Inconclusive map[string]int64 `json:"inconclusive"`
}

// ForgeReport is the forger's part of a Report.
type ForgeReport struct {
	// Written counts the forged records put, by kind (no_mac, bad_mac,
	// bad_schema, copy, endpoint, tool).
	Written map[string]int64 `json:"written"`
	// SignedRecords and UnsignedRecords count the genuine records the
	// forger copied by whether they carried a "sig".
	SignedRecords   int64 `json:"signed_records"`
	UnsignedRecords int64 `json:"unsigned_records"`
	// TrapHits counts the requests that reached the trap, and of them the
	// ones that carried the run's fleet token and a caller's credential.
	TrapHits       int64 `json:"trap_hits"`
	TrapFleetToken int64 `json:"trap_fleet_token"`
	TrapCallerCred int64 `json:"trap_caller_credential"`
	// ImpostorHits counts the requests that reached the impostor's
	// listener, and of them the ones that held the run's fleet token and
	// a caller's token (in a header value or the body).
	ImpostorHits        int64 `json:"impostor_hits"`
	ImpostorFleetToken  int64 `json:"impostor_fleet_token"`
	ImpostorCallerToken int64 `json:"impostor_caller_token"`
}

// SurfaceReport is the prompts', templates', resources' and progress
// calls' part of a Report.
type SurfaceReport struct {
	Starts        map[string]int64 `json:"starts"` // by kind
	Claims        map[string]int64 `json:"claims"` // starts that claimed, by kind
	PromptGets    map[string]int64 `json:"prompt_gets"`
	TemplateReads map[string]int64 `json:"template_reads"`
	// Updates: Published counts the Updated calls of live consumers that
	// succeeded, Refused those that got ErrDeadOwner as their consumer
	// died meanwhile, LateRefused the calls made after the death was
	// observed that got it; Heard the updates subscribers heard, through
	// Subscribed subscriptions (SubscribeFailed more were refused or
	// failed).
	Updates struct {
		Published       int64 `json:"published"`
		Refused         int64 `json:"refused_dying"`
		LateRefused     int64 `json:"late_refused"`
		Heard           int64 `json:"heard"`
		Subscribed      int64 `json:"subscribed"`
		SubscribeFailed int64 `json:"subscribe_failed"`
	} `json:"updates"`
	// Progress counts the progress calls by outcome; Judged those answered
	// by the body that reported, Forwarded of them those forwarded,
	// Unjudged those answered otherwise.
	Progress  map[string]int64 `json:"progress_calls"`
	Judged    int64            `json:"progress_judged"`
	Forwarded int64            `json:"progress_forwarded"`
	Unjudged  int64            `json:"progress_unjudged"`
}

// Verdict is what decides how the run ends: its violations and unexpected
// errors, and whether a signal cut it short.
func (r *Report) Verdict() report.Verdict { return r.Findings.Verdict(r.Head) }

func (w *world) report(elapsed time.Duration, interrupted bool, conv, settled time.Duration) *Report {
	r := &Report{Head: report.Head{Seed: w.cfg.Seed, DurationS: elapsed.Seconds(), Interrupted: interrupted, Mode: "fleet"},
		Ops: map[string]latency.Stats{}, Deaths: map[string]int64{}, CallOutcomes: map[string]int64{},
		Inconclusive: map[string]int64{}}
	c := &r.Config
	c.Fleet, c.Consumers, c.Resolvers, c.Names = w.cfg.Fleet, w.cfg.Consumers, w.cfg.Resolvers, w.cfg.Names
	c.TTLS, c.ChaosEvery = w.cfg.TTL.Seconds(), w.cfg.ChaosEvery.Seconds()
	c.Etcd = "embedded"
	if len(w.cfg.Etcd) > 0 {
		c.Etcd = strings.Join(w.cfg.Etcd, ",")
	}
	hists := w.lats.Merged()
	for o := range numOps {
		r.Ops[o.String()] = latency.StatsOf(hists[o], elapsed)
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
	tb := &w.tasks
	r.Tasks.Started, r.Tasks.Completed, r.Tasks.FailedGone, r.Tasks.FailedLost, r.Tasks.Unavailable =
		tb.started.Load(), tb.completed.Load(), tb.failedGone.Load(), tb.failedLost.Load(), tb.unavailable.Load()
	w.surfaceReport(&r.Surface)
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
	if fg := w.fg; fg != nil {
		r.Forge = &ForgeReport{Written: map[string]int64{}, SignedRecords: fg.signed.Load(), UnsignedRecords: fg.unsigned.Load(),
			TrapHits: fg.trap.hits.Load(), TrapFleetToken: fg.trap.fleetToken.Load(), TrapCallerCred: fg.trap.callerCred.Load()}
		if im := w.im; im != nil {
			r.Forge.ImpostorHits, r.Forge.ImpostorFleetToken, r.Forge.ImpostorCallerToken = im.hits.Load(), im.leaked[0].Load(), im.leaked[1].Load()
		}
		for k := range numForgeKinds {
			r.Forge.Written[k.String()] = fg.written[k].Load()
		}
	}
	r.Violations, r.Checks, r.ViolationExamples = w.t.Summary(Invariants)
	for _, inv := range Invariants {
		r.Inconclusive[inv.String()] = w.t.inconclusive[inv].Load()
	}
	r.Errors, r.ErrorExamples = w.t.Errors(), w.t.ErrorExamples()
	return r
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
	latency.WriteTable(out, opNames[:], r.Ops)
	switch {
	case r.Ops[opQuietForward.String()].Count == 0:
		fmt.Fprintf(out, "\nforward overhead: not measured (it takes two replicas up at the end)\n")
	default:
		met := "met"
		if !r.ForwardTargetMet {
			met = "NOT met"
		}
		fmt.Fprintf(out, "\nforward overhead at p50, churn stopped: %s (forwarded %s, local %s; target %s %s); under load: %s\n",
			latency.Format(r.ForwardOverheadP50), latency.Format(r.Ops[opQuietForward.String()].P50), latency.Format(r.Ops[opQuietLocal.String()].P50),
			latency.Format(int64(ForwardTarget)), met, latency.Format(r.LoadedOverheadP50))
	}
	fmt.Fprintf(out, "claims: %d of %d starts (%.0f/s), %d duplicates, %d refused between sessions, %d late stops\n",
		r.Claims, r.Starts, r.ClaimsPerSec, r.Duplicates, r.Refused, r.LateStops)
	fmt.Fprintf(out, "deaths: %s\n", report.Counts(r.Deaths, shapeNames[:]))
	fmt.Fprintf(out, "call outcomes: %s\n", report.Counts(r.CallOutcomes, outcomeNames[:]))
	fmt.Fprintf(out, "tasks read through other replicas: %d started, %d completed, %d failed as their consumer died, %d failed as their replica was lost; %d retryable unavailable reads\n",
		r.Tasks.Started, r.Tasks.Completed, r.Tasks.FailedGone, r.Tasks.FailedLost, r.Tasks.Unavailable)
	s := &r.Surface
	fmt.Fprintf(out, "surface consumers: %s started, %s claimed\n", report.Counts(s.Starts, surfKindNames[:]), report.Counts(s.Claims, surfKindNames[:]))
	fmt.Fprintf(out, "prompt gets: %s\n", report.Counts(s.PromptGets, outcomeNames[:]))
	fmt.Fprintf(out, "templated reads: %s\n", report.Counts(s.TemplateReads, outcomeNames[:]))
	fmt.Fprintf(out, "resource updates: %d published, %d refused as their consumer died, %d refused after the death was observed; %d heard through %d subscriptions on other replicas (%d subscribes refused or failed)\n",
		s.Updates.Published, s.Updates.Refused, s.Updates.LateRefused, s.Updates.Heard, s.Updates.Subscribed, s.Updates.SubscribeFailed)
	fmt.Fprintf(out, "progress calls: %s; %d judged (%d forwarded), %d answered by no progress body\n", report.Counts(s.Progress, outcomeNames[:]), s.Judged, s.Forwarded, s.Unjudged)
	fmt.Fprintf(out, "failures: %d crashes, %d leases revoked, %d cuts from etcd; %d sessions lost in all\n",
		r.Crashes, r.SessionLosses.Revoked, r.SessionLosses.Cut, r.SessionLosses.Observed)
	free := make([]string, len(r.CrashFreeNs))
	for i, d := range r.CrashFreeNs {
		free[i] = latency.Format(d)
		if i < len(r.CrashLeaseGoneNs) {
			free[i] += " (lease gone " + latency.Format(r.CrashLeaseGoneNs[i]) + ")"
		}
	}
	fmt.Fprintf(out, "crashed replicas' names claimed elsewhere after: [%s]\n", strings.Join(free, ", "))
	fmt.Fprintf(out, "listings the same %s after churn stopped, the live routes after %s\n", latency.Format(r.ConvergenceNs), latency.Format(r.SettledNs))
	if f := r.Forge; f != nil {
		var n int64
		for _, c := range f.Written {
			n += c
		}
		fmt.Fprintf(out, "forger: %d forged records written (%s); genuine records it copied: %d signed, %d unsigned; the trap received %d requests (%d with the fleet token, %d with a caller's credential)\n",
			n, report.Counts(f.Written, forgeKindNames[:]), f.SignedRecords, f.UnsignedRecords, f.TrapHits, f.TrapFleetToken, f.TrapCallerCred)
		fmt.Fprintf(out, "impostor: its listener received %d requests (%d with the fleet token, %d with a caller's token)\n",
			f.ImpostorHits, f.ImpostorFleetToken, f.ImpostorCallerToken)
	}
	fmt.Fprintln(out)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "invariant\tchecks\tinconclusive\tviolations")
	for _, inv := range Invariants {
		fmt.Fprintf(tw, "%d %s\t%d\t%d\t%d\n", inv.Number(), inv, r.Checks[inv.String()], r.Inconclusive[inv.String()], r.Violations[inv.String()])
	}
	tw.Flush()
	report.WriteEnd(out, Invariants, r.ViolationExamples, r.ErrorExamples, r.Verdict())
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(out io.Writer) error { return report.WriteJSON(out, r) }

func (w *world) surfaceReport(s *SurfaceReport) {
	s.Starts, s.Claims = map[string]int64{}, map[string]int64{}
	for k := range numSurfKinds {
		s.Starts[k.String()] = w.surfStarts[k].Load()
		s.Claims[k.String()] = w.surfClaims[k].Load()
	}
	s.PromptGets = surfaceCounts(&w.surfOutcomes[surfPrompt])
	s.TemplateReads = surfaceCounts(&w.surfOutcomes[surfTemplate])
	b := w.subs
	u := &s.Updates
	u.Published, u.Refused, u.LateRefused = b.published.Load(), b.refused.Load(), b.lateRefused.Load()
	u.Heard, u.Subscribed, u.SubscribeFailed = b.heard.Load(), b.subscribed.Load(), b.subscribeFailed.Load()
	p := w.prog
	s.Progress = surfaceCounts(&p.outcomes)
	s.Judged, s.Forwarded, s.Unjudged = p.ok.Load(), p.forwarded.Load(), p.unjudged.Load()
}
