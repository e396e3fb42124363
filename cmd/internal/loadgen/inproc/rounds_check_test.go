package inproc

import (
	"context"
	"encoding/json"
	"errors"
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

// taskFake is a tasker whose task is run by rec's body (the nonce noted
// at start) and reads reads, one per GetTask, the last over and over.
type taskFake struct {
	w     *world
	rec   *record
	reads []catalog.TaskStatus
}

func (f *taskFake) StartTask(_ context.Context, _ string, args json.RawMessage, _ string) (string, error) {
	var a callArgs
	if err := decodeArgs(args, &a); err != nil {
		return "", err
	}
	f.w.taskOwners.Store(a.Task, f.rec)
	return "t", nil
}

func (f *taskFake) GetTask(string, string) (catalog.TaskInfo, error) {
	st := f.reads[0]
	if len(f.reads) > 1 {
		f.reads = f.reads[1:]
	}
	return catalog.TaskInfo{Status: st, Err: catalog.ErrRouteGone}, nil
}

// TestCheckerTaskOutlivedConsumer feeds invariant 18's check the reads of
// a task whose consumer was observed dead: failed at once is no
// violation, working after the death is one.
func TestCheckerTaskOutlivedConsumer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reads      []catalog.TaskStatus
		violations int64
	}{
		{"failed at once", []catalog.TaskStatus{catalog.TaskFailed}, 0},
		{"working after the death", []catalog.TaskStatus{catalog.TaskWorking, catalog.TaskFailed}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := NewCatalogSystem(testConfig())
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(testConfig(), cs)
			rec := w.newRecord(w.names[0], true)
			rec.death.Store(w.tick()) // observed dead before the task's reads
			f := &taskFake{w: w, rec: rec, reads: tc.reads}
			if _, err := w.callAsTask(context.Background(), f, "x", encodeArgs(w.tick(), credValid, 0, 0), ""); !errors.Is(err, catalog.ErrRouteGone) {
				t.Fatal(err)
			}
			if c, v := w.t.Checks(InvTaskOutlivedConsumer), w.t.Violations(InvTaskOutlivedConsumer); c < 1 || v != tc.violations {
				t.Errorf("%d checks, %d violations; want some and %d", c, v, tc.violations)
			}
		})
	}
}

// Invariant 19 fires for a store past any of its bounds, and only then.
func TestCheckerTaskStoreBounds(t *testing.T) {
	for _, tc := range []struct {
		n          catalog.TaskCounts
		violations int64
	}{
		{catalog.TaskCounts{Held: TaskCap, MostPerCaller: TaskCapPerCaller, ResultBytes: TaskResultBytes}, 0},
		{catalog.TaskCounts{Held: TaskCap + 1}, 1},
		{catalog.TaskCounts{Held: 1, MostPerCaller: TaskCapPerCaller + 1}, 1},
		{catalog.TaskCounts{Held: 1, MostPerCaller: 1, ResultBytes: TaskResultBytes + 1}, 1},
	} {
		tl := &tally{}
		checkTaskStore(tl, tc.n)
		if c, v := tl.Checks(InvTaskStoreBounds), tl.Violations(InvTaskStoreBounds); c != 1 || v != tc.violations {
			t.Errorf("%+v: %d checks, %d violations; want 1 and %d", tc.n, c, v, tc.violations)
		}
	}
}
