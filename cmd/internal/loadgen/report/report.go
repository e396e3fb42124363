// Package report holds what both loadgen modes, the single-process one
// (inproc) and the fleet one (fleet), share in
// ending a run: how a run is interrupted, the verdict that closes its
// text report and decides cmd/loadgen's exit status, the count lists of
// that report, and its JSON.
//
// The model: a run fails on any violation of an invariant or any
// unexpected error, whatever else happened; a run cut short by a signal
// with neither is incomplete, never a pass, so that no script takes it
// for one; only a run that did all it was asked without either passes.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes of cmd/loadgen, in either mode.
const (
	ExitOK         = 0 // no violations and no errors
	ExitViolations = 1 // violations or errors, listed in the report
	ExitUsage      = 2 // bad flags
	// ExitIncomplete: interrupted (SIGINT, SIGTERM) before the run's
	// duration, with no violation seen so far.
	ExitIncomplete = 3
)

// Verdict is what decides how a run ends.
type Verdict struct {
	Violations  int64   // of every invariant together
	Errors      int64   // unexpected ones
	Interrupted bool    // by a signal, before the run's duration
	DurationS   float64 // the load phase, in seconds
}

// Failed reports whether the run must exit non-zero: any violation, or
// any error a correct system does not produce.
func (v Verdict) Failed() bool { return v.Violations > 0 || v.Errors > 0 }

// ExitCode is the exit status the verdict calls for: violations win over
// an interruption, which is never a pass.
func (v Verdict) ExitCode() int {
	switch {
	case v.Failed():
		return ExitViolations
	case v.Interrupted:
		return ExitIncomplete
	}
	return ExitOK
}

// Total sums a report's violation counts.
func Total(violations map[string]int64) int64 {
	var n int64
	for _, c := range violations {
		n += c
	}
	return n
}

// WriteEnd writes the end of a text report: the messages kept of each
// violated invariant, in invs' order, those of the unexpected errors, and
// the verdict line, FAIL, INCOMPLETE or PASS.
func WriteEnd[K fmt.Stringer](out io.Writer, invs []K, examples map[string][]string, errorExamples []string, v Verdict) {
	for _, inv := range invs {
		for _, ex := range examples[inv.String()] {
			fmt.Fprintf(out, "VIOLATION %s: %s\n", inv, ex)
		}
	}
	for _, ex := range errorExamples {
		fmt.Fprintf(out, "ERROR: %s\n", ex)
	}
	switch {
	case v.Failed():
		fmt.Fprintf(out, "\nFAIL: %d violations, %d errors\n", v.Violations, v.Errors)
	case v.Interrupted:
		fmt.Fprintf(out, "\nINCOMPLETE: interrupted after %.2fs; 0 violations so far\n", v.DurationS)
	default:
		fmt.Fprintf(out, "\nPASS: 0 violations\n")
	}
}

// Counts lists m's non-zero counts in order, "name n" each, comma
// separated; "none" when there are none. Keys of m not in order are left
// out.
func Counts(m map[string]int64, order []string) string {
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

// WriteJSON writes v as indented JSON, the form -json writes.
func WriteJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteJSONFile writes v as WriteJSON does to the file at path, created or
// truncated, or to stdout when path is "-".
func WriteJSONFile(path string, v any, stdout io.Writer) error {
	if path == "-" {
		return WriteJSON(stdout, v)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Interruptible returns a context that ends at the first SIGINT or
// SIGTERM, so that a run can stop early and still report. After that
// first signal the default action is restored: a second one kills the
// process. stop releases the signals at once; call it when the run ends.
func Interruptible(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
