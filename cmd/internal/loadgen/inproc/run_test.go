package inproc

import (
	"context"
	"testing"
	"time"
)

// The whole workload against the real catalog: no violations, no errors,
// and the run exercised what it claims to (every death shape, takeovers,
// cap rejections, late stops, every invariant checked).
func TestRunCatalog(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 1500 * time.Millisecond
	cfg.Seed = 42
	sys, err := NewCatalogSystem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), cfg, sys, RunOptions{})

	for _, inv := range Invariants {
		if got := rep.Violations[inv.String()]; got != 0 {
			t.Errorf("%s: %v: rep.Violations[inv.String()] = %v, want 0", inv, rep.ViolationExamples[inv.String()], got)
		}
		if got := rep.Checks[inv.String()]; got <= 0 {
			t.Errorf("%s was never checked: rep.Checks[inv.String()] = %v, want > 0", inv, got)
		}
	}
	if got := rep.Errors; got != 0 {
		t.Errorf("%v: rep.Errors = %v, want 0", rep.ErrorExamples, got)
	}
	if rep.Failed() {
		t.Errorf("rep.Failed() = %v, want %v", true, false)
	}
	for _, sh := range []string{"stop", "cancel", "panic", "drop"} {
		if got := rep.Deaths[sh]; got <= 0 {
			t.Errorf("no consumer died by %s: rep.Deaths[sh] = %v, want > 0", sh, got)
		}
	}
	if got := rep.Takeovers; got <= 0 {
		t.Errorf("no takeover: rep.Takeovers = %v, want > 0", got)
	}
	if got := rep.CapRejections; got <= 0 {
		t.Errorf("no start hit the cap: rep.CapRejections = %v, want > 0", got)
	}
	if got := rep.Duplicates; got <= 0 {
		t.Errorf("no start hit a live duplicate: rep.Duplicates = %v, want > 0", got)
	}
	if got := rep.LateStopChecks; got <= 0 {
		t.Errorf("no late stop was checked: rep.LateStopChecks = %v, want > 0", got)
	}
	if got := rep.UnexpectedDeaths; got != 0 {
		t.Errorf("rep.UnexpectedDeaths = %v, want 0", got)
	}
	for _, o := range []string{"call", "get", "read", "list", "start", "stop", "late_stop"} {
		if got := rep.Ops[o].Count; got <= 0 {
			t.Errorf("no %s measured: rep.Ops[o].Count = %v, want > 0", o, got)
		}
	}
	for _, outcomes := range []map[string]int64{rep.CallOutcomes, rep.GetOutcomes, rep.ReadOutcomes, rep.ResourceOutcomes} {
		if got := outcomes["ok"]; got <= 0 {
			t.Errorf("%v: outcomes[\"ok\"] = %v, want > 0", outcomes, got)
		}
		if got := outcomes["denied"]; got <= 0 {
			t.Errorf("%v: outcomes[\"denied\"] = %v, want > 0", outcomes, got)
		}
		if got := outcomes["unknown"]; got <= 0 {
			t.Errorf("%v: outcomes[\"unknown\"] = %v, want > 0", outcomes, got)
		}
	}
	for _, k := range []string{"tool", "prompt", "template", "resource"} {
		if got := rep.KindStarts[k]; got <= 0 {
			t.Errorf("no %s started: rep.KindStarts[k] = %v, want > 0", k, got)
		}
	}
	if got := rep.UpdatesPublished; got <= 0 {
		t.Errorf("no resource update published: rep.UpdatesPublished = %v, want > 0", got)
	}
	if got := rep.UpdatesRefused; got <= 0 {
		t.Errorf("no dead consumer's update refused: rep.UpdatesRefused = %v, want > 0", got)
	}
}

// The control: the correct fake under the whole workload shows nothing.
func TestRunCorrectFake(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 500 * time.Millisecond
	f := newFake(cfg.Cap, 0)
	defer f.Close()
	rep := Run(context.Background(), cfg, f, RunOptions{})
	if got := rep.TotalViolations(); got != 0 {
		t.Errorf("%v: rep.TotalViolations() = %v, want 0", rep.ViolationExamples, got)
	}
	if got := rep.Errors; got != 0 {
		t.Errorf("%v: rep.Errors = %v, want 0", rep.ErrorExamples, got)
	}
}

// The workload's own loops, not just the scenarios, feed each checker: a
// fault with a high event rate is caught by a short run.
func TestRunCatchesFaults(t *testing.T) {
	tests := []struct {
		bug bug
		inv Invariant
	}{
		{bugRunDeadBodies, InvBodyAfterDeath},
		{bugUnconditionalStop, InvLateStopRemovedSuccessor},
		{bugNoAuth, InvUnauthenticatedBody},
		{bugCapOvershoot, InvCapCounter},
		{bugSlotsNotFreed, InvCapCounter},
		{bugGoneForDead, InvDeadEntryReturned},
		{bugStopRemovesPlan, InvLateStopRemovedSuccessor},
		{bugListDead, InvDeadEntryReturned},
		{bugDupDead, InvDuplicateWithDeadIncumbent},
		{bugLeak, InvResourceGrowth},
		{bugBodyAfterStop, InvBodyAfterStop},
		{bugStaleBody, InvOneWinner},
		{bugLiveTakeover, InvOneWinner},
		{bugUpdateDead, InvResourceUpdate},
		{bugUpdateDropped, InvResourceUpdate},
		{bugNoDrain, InvStopDrain},
		{bugDeathSilent, InvListChanged},
		{bugListDying, InvListedDeadOwner},
		{bugTornListing, InvListingInstant},
	}
	for _, tt := range tests {
		t.Run(bugName(tt.bug), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Duration = 700 * time.Millisecond
			f := newFake(cfg.Cap, tt.bug)
			defer f.Close()
			tol := DefaultGrowthTolerance
			tol.EndWait = 300 * time.Millisecond
			rep := Run(context.Background(), cfg, f, RunOptions{Tolerance: &tol, QuietTimeout: 100 * time.Millisecond, changeWithin: 200 * time.Millisecond})
			if got := rep.Violations[tt.inv.String()]; got <= 0 {
				t.Errorf("checks %d: rep.Violations[tt.inv.String()] = %v, want > 0", rep.Checks[tt.inv.String()], got)
			}
			if !rep.Failed() {
				t.Errorf("rep.Failed() = %v, want %v", false, true)
			}
			t.Logf("%s: %d violations of %d checks, e.g. %v", tt.inv, rep.Violations[tt.inv.String()], rep.Checks[tt.inv.String()], first(rep.ViolationExamples[tt.inv.String()]))
		})
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
