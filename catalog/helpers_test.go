package catalog_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// eventually polls cond every millisecond until it holds, and fails the
// test with what if it does not hold within timeout: for what the catalog
// does a moment later on a goroutine of its own (a reclaim, a count).
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v: %s", timeout, what)
		}
	}
}

// jsonEqual reports whether two JSON documents hold the same value,
// whatever their spacing and key order. A document that does not parse
// equals nothing.
func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
