package report

import (
	"encoding/json"
	"testing"
)

// A report's verdict sums its violations over every invariant, counts its
// errors, and takes the interruption and duration from its head.
func TestFindingsVerdict(t *testing.T) {
	f := Findings{Violations: map[string]int64{"a": 2, "b": 0, "c": 3}, Errors: 1}
	got := f.Verdict(Head{Interrupted: true, DurationS: 1.5})
	want := Verdict{Violations: 5, Errors: 1, Interrupted: true, DurationS: 1.5}
	if got != want {
		t.Errorf("Verdict = %+v, want %+v", got, want)
	}
	if !f.Failed() {
		t.Error("Failed = false with violations and errors")
	}
	if (&Findings{Violations: map[string]int64{"a": 0}}).Failed() {
		t.Error("Failed = true with neither violations nor errors")
	}
	if !(&Findings{Errors: 1}).Failed() {
		t.Error("Failed = false with an unexpected error alone")
	}
}

// Embedded in a report, Head and Findings write their keys as the
// report's own: the JSON is a contract with scripts.
func TestHeadFindingsJSONKeys(t *testing.T) {
	var r struct {
		Head
		Other int `json:"other"`
		Findings
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"seed", "duration_s", "interrupted", "mode", "other", "violations", "checks", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON %s lacks top-level key %q", b, k)
		}
	}
	if len(m) != 8 {
		t.Errorf("JSON %s: %d keys, want 8 (the examples are omitted when empty)", b, len(m))
	}
}
