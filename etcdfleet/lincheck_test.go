package etcdfleet_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkHistory reports whether history is linearizable under model; when
// it is not, it logs the longest linearization the checker found and the
// operations that could not follow it, and leaves porcupine's
// visualization in a file.
func checkHistory(t *testing.T, model porcupine.Model, history []porcupine.Operation, what string) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, history, 10*time.Second)
	if res != porcupine.Illegal {
		return res
	}
	path := "(no file)"
	if f, err := os.CreateTemp("", "etcdfleet-linearizability-*.html"); err == nil {
		path = f.Name()
		_ = f.Close()
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = fmt.Sprintf("(visualization failed: %v)", err)
		}
	}
	t.Errorf("%s: history of %d operations is not linearizable; visualization: %s", what, len(history), path)
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	describe := func(op porcupine.Operation) string {
		return fmt.Sprintf("slot %d [%6.2f ms, %6.2f ms] %s", op.ClientId, float64(op.Call)/1e6, float64(op.Return)/1e6, describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
	}
	t.Logf("longest linearization, %d of %d operations, each with the possible states after it:", len(best), len(history))
	state := model.Init()
	done := map[int64]bool{}
	for _, op := range best {
		_, state = model.Step(state, op.Input, op.Output)
		done[op.Call] = true
		t.Logf("  %-70s %s", describe(op), model.DescribeState(state))
	}
	rest := slices.DeleteFunc(slices.Clone(history), func(op porcupine.Operation) bool { return done[op.Call] })
	slices.SortFunc(rest, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	t.Logf("left over, by call time (the first could not follow):")
	for i, op := range rest[:min(len(rest), 8)] {
		t.Logf("  %d %s", i, describe(op))
	}
	return res
}
