package report

// Head opens both worlds' reports: which run it was and how long it ran.
// Embedded, its fields are the report's own, in its JSON too.
type Head struct {
	Seed        uint64  `json:"seed"`
	DurationS   float64 `json:"duration_s"` // the load phase, wind-down excluded
	Interrupted bool    `json:"interrupted"`
	Mode        string  `json:"mode"` // the world, as each report documents
}

// Findings closes both worlds' reports: what the checks found. Embedded,
// its fields are the report's own, in its JSON too.
type Findings struct {
	// Violations maps every invariant's name to its count, zeros included;
	// Checks maps it to how often it was checked.
	Violations        map[string]int64    `json:"violations"`
	Checks            map[string]int64    `json:"checks"`
	ViolationExamples map[string][]string `json:"violation_examples,omitempty"`
	Errors            int64               `json:"errors"` // unexpected ones
	ErrorExamples     []string            `json:"error_examples,omitempty"`
}

// TotalViolations sums the violation counts.
func (f *Findings) TotalViolations() int64 { return Total(f.Violations) }

// Failed reports whether the run must exit non-zero: any violation, or
// any error a correct system does not produce.
func (f *Findings) Failed() bool { return f.Verdict(Head{}).Failed() }

// Verdict is what decides how the run of h ends: its violations and
// unexpected errors, and whether a signal cut it short.
func (f *Findings) Verdict(h Head) Verdict {
	return Verdict{Violations: f.TotalViolations(), Errors: f.Errors, Interrupted: h.Interrupted, DurationS: h.DurationS}
}
