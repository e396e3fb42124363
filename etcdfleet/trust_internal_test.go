package etcdfleet

import (
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A flood of rejected records logs one line, which counts the rest; a key
// already logged is never logged again; the log never quotes more than a
// bounded prefix of a key.
func TestRejectLogIsBounded(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core)
	l := rejectLog{seen: map[string]struct{}{}}
	for i := range 1000 {
		l.note(log, fmt.Sprintf("/p/tools/forged-%d", i), errForged)
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines for a flood of 1000 rejections, want 1", n)
	}
	l.next = l.next.Add(-2 * rejectLogEvery) // the interval has passed
	l.note(log, "/p/tools/forged-0", errForged)
	if n := logs.Len(); n != 1 {
		t.Fatalf("a key logged before was logged again (%d lines)", n)
	}
	long := "/p/tools/" + string(make([]byte, 10000))
	l.note(log, long, errors.New("reason"))
	entries := logs.All()
	if len(entries) != 2 {
		t.Fatalf("%d lines, want 2", len(entries))
	}
	f := entries[1].ContextMap()
	if k, _ := f["key"].(string); len(k) > 4*64+8 {
		t.Errorf("a key of %d bytes logged as %d bytes", len(long), len(k))
	}
	if n, _ := f["unlogged_since_last"].(int64); n != 999 {
		t.Errorf("unlogged_since_last = %v, want 999", f["unlogged_since_last"])
	}
}
