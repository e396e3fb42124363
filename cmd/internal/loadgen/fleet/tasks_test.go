package fleet

import "testing"

// Invariants 9 and 10 judge each read of a task: a working read begun
// after its consumer was observed dead, another body's answer, and a lost
// replica that is up are violations; the rest are not.
func TestJudgeTaskRead(t *testing.T) {
	up, crashed := &replica{id: 1, name: "a"}, &replica{id: 2, name: "b"}
	crashed.crashed.Store(true)
	live := rec(up, "fl-1", "n", 7, false)
	dead := rec(up, "fl-2", "n", 7, true)
	dead.death.Store(10)
	lost := rec(crashed, "fl-3", "n", 7, false)
	done := func(text string) map[string]any {
		return map[string]any{"status": "completed", "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}}
	}
	failed := func(reason string) map[string]any {
		return map[string]any{"status": "failed", "error": map[string]any{"code": -32602, "data": map[string]any{"reason": reason}}}
	}
	for _, tc := range []struct {
		name       string
		rec        *record
		began      uint64
		res        map[string]any
		inv        Invariant
		violations int64
		ended      bool
	}{
		{"working, its consumer alive", live, 20, map[string]any{"status": "working"}, InvTaskOutlivedConsumer, 0, false},
		{"working, read before the death was seen", dead, 9, map[string]any{"status": "working"}, InvTaskOutlivedConsumer, 0, false},
		{"working, read after the death was seen", dead, 11, map[string]any{"status": "working"}, InvTaskOutlivedConsumer, 1, false},
		{"input_required after the death", dead, 11, map[string]any{"status": "input_required"}, InvTaskOutlivedConsumer, 1, false},
		{"failed after the death", dead, 11, failed("route_gone"), InvTaskOutlivedConsumer, 0, true},
		{"its own answer", live, 20, done(taskResult(live, 5)), InvTaskAnsweredByOther, 0, true},
		{"another task's answer", live, 20, done(taskResult(live, 6)), InvTaskAnsweredByOther, 1, true},
		{"another consumer's answer", live, 20, done(taskResult(dead, 5)), InvTaskAnsweredByOther, 1, true},
		{"replica lost, its holder crashed", lost, 20, failed("replica_lost"), InvTaskAnsweredByOther, 0, true},
		{"replica lost, its holder up", live, 20, failed("replica_lost"), InvTaskAnsweredByOther, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{t: &tally{}}
			if got := w.judgeTaskRead(tc.rec, 5, tc.began, up, tc.res); got != tc.ended {
				t.Errorf("ended = %v, want %v", got, tc.ended)
			}
			if v := w.t.Violations(tc.inv); v != tc.violations {
				t.Errorf("%s: %d violations, want %d", tc.inv, v, tc.violations)
			}
		})
	}
}
