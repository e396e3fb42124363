package inproc

import (
	"context"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// TestCheckerRoundReachedOther feeds invariant 17's check the answers of
// callers answering mid-call: its own tag is no violation, another
// consumer's is one, and a caller that cannot be asked is not judged.
func TestCheckerRoundReachedOther(t *testing.T) {
	cs, err := NewCatalogSystem(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(testConfig(), cs)
	rec := w.newRecord(w.names[0], true)
	k, err := cs.Cat.StartTool(context.Background(), catalog.Tool{Name: "asker"}, bindsec.Plan{Public: true},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			return catalog.TextResult("ok"), w.askRound(ctx, rec, c)
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	answering := func(asker string) catalog.CallOption {
		return catalog.WithClient(&catalog.Client{Elicit: func(context.Context, catalog.ElicitRequest) (catalog.ElicitResult, error) {
			return catalog.ElicitResult{Action: catalog.ElicitAccept, Content: map[string]any{"asker": asker}}, nil
		}})
	}
	for _, tc := range []struct {
		name               string
		opts               []catalog.CallOption
		checks, violations int64
	}{
		{"cannot be asked", nil, 0, 0},
		{"its own", []catalog.CallOption{answering(rec.tag)}, 1, 0},
		{"another's", []catalog.CallOption{answering("lg#0")}, 2, 1},
	} {
		if _, err := cs.Cat.CallTool(context.Background(), "asker", nil, "", tc.opts...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c, v := w.t.Checks(InvRoundReachedOther), w.t.Violations(InvRoundReachedOther); c != tc.checks || v != tc.violations {
			t.Errorf("%s: %d checks, %d violations; want %d, %d", tc.name, c, v, tc.checks, tc.violations)
		}
	}
}
