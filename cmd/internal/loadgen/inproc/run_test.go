package inproc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The whole workload against the real catalog: no violations, no errors,
// and the run exercised what it claims to (every death shape, takeovers,
// cap rejections, late stops, every invariant checked).
func TestRunCatalog(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 1500 * time.Millisecond
	cfg.Seed = 42
	sys, err := NewCatalogSystem(cfg)
	require.NoError(t, err)
	rep := Run(context.Background(), cfg, sys, RunOptions{})

	for _, inv := range Invariants {
		assert.Zero(t, rep.Violations[inv.String()], "%s: %v", inv, rep.ViolationExamples[inv.String()])
		assert.Positive(t, rep.Checks[inv.String()], "%s was never checked", inv)
	}
	assert.Zero(t, rep.Errors, "%v", rep.ErrorExamples)
	assert.False(t, rep.Failed())
	for _, sh := range []string{"stop", "cancel", "panic", "drop"} {
		assert.Positive(t, rep.Deaths[sh], "no consumer died by %s", sh)
	}
	assert.Positive(t, rep.Takeovers, "no takeover")
	assert.Positive(t, rep.CapRejections, "no start hit the cap")
	assert.Positive(t, rep.Duplicates, "no start hit a live duplicate")
	assert.Positive(t, rep.LateStopChecks, "no late stop was checked")
	assert.Zero(t, rep.UnexpectedDeaths)
	for _, o := range []string{"call", "get", "read", "list", "start", "stop", "late_stop"} {
		assert.Positive(t, rep.Ops[o].Count, "no %s measured", o)
	}
	for _, outcomes := range []map[string]int64{rep.CallOutcomes, rep.GetOutcomes, rep.ReadOutcomes, rep.ResourceOutcomes} {
		assert.Positive(t, outcomes["ok"], "%v", outcomes)
		assert.Positive(t, outcomes["denied"], "%v", outcomes)
		assert.Positive(t, outcomes["unknown"], "%v", outcomes)
	}
	for _, k := range []string{"tool", "prompt", "template", "resource"} {
		assert.Positive(t, rep.KindStarts[k], "no %s started", k)
	}
	assert.Positive(t, rep.UpdatesPublished, "no resource update published")
	assert.Positive(t, rep.UpdatesRefused, "no dead consumer's update refused")
}

// The control: the correct fake under the whole workload shows nothing.
func TestRunCorrectFake(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Duration = 500 * time.Millisecond
	f := newFake(cfg.Cap, 0)
	defer f.Close()
	rep := Run(context.Background(), cfg, f, RunOptions{})
	assert.Zero(t, rep.TotalViolations(), "%v", rep.ViolationExamples)
	assert.Zero(t, rep.Errors, "%v", rep.ErrorExamples)
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
			assert.Positive(t, rep.Violations[tt.inv.String()], "checks %d", rep.Checks[tt.inv.String()])
			assert.True(t, rep.Failed())
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
