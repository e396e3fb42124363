package shardreg_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
)

// The linearizability check: clients on goroutines of their own run random
// operations on one registry while owners die, every call and return is
// stamped on one logical clock, and porcupine searches for a sequential
// order that the model in linmodel_test.go accepts. The scripted
// regressions it found are in linregress_test.go; linmutants_test.go shows
// that the model itself can tell a wrong registry from a right one.

// describeLinStates shows the possible states one to a line; what all of
// them share (the dead owners, the pending Prunes' calls) comes once.
func describeLinStates(set linStates) string {
	var b strings.Builder
	for i, s := range set.members {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString("{")
		for j, e := range s.entries {
			if j > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s:%s", linNameStrs[j], describeSlot(e, s))
		}
		for c, p := range s.prunes {
			if p.pending {
				fmt.Fprintf(&b, " | c%d's Prune: %d reclaims", c, p.reclaims)
			}
		}
		b.WriteString("}")
	}
	if len(set.members) == 0 {
		return "(none)"
	}
	s := set.members[0]
	b.WriteString(" | dead:")
	for o := range int8(linOwners) {
		if !s.isAlive(o) {
			fmt.Fprintf(&b, " o%d", o)
		}
	}
	return b.String()
}

func describeSlot(e linSlot, s linState) string {
	if !e.present {
		return "-"
	}
	out := fmt.Sprintf("o%d=v%d", e.owner, e.value)
	if e.ready {
		out += "+ready"
	}
	if !s.isAlive(e.owner) {
		out += "(dead)"
	}
	return out
}

func describeLinOp(in linInput, out linOutput) string {
	name := linNameStrs[in.name]
	switch in.op {
	case linRegister, linRegisterReady, linOverwrite:
		return fmt.Sprintf("%s(%s, o%d, v%d) -> %s", linOpNames[in.op], name, in.owner, in.value, errNames[out.err])
	case linMarkReady, linUnregister:
		return fmt.Sprintf("%s(%s, o%d) -> %v", linOpNames[in.op], name, in.owner, out.ok)
	case linResolve:
		if !out.ok {
			return fmt.Sprintf("Resolve(%s) -> miss", name)
		}
		return fmt.Sprintf("Resolve(%s) -> o%d=v%d", name, out.entry.owner, out.entry.value)
	case linList:
		var parts []string
		for i, e := range out.list {
			if e.present {
				parts = append(parts, fmt.Sprintf("%s:o%d=v%d", linNameStrs[i], e.owner, e.value))
			}
		}
		return "ListReady() -> [" + strings.Join(parts, " ") + "]"
	case linPruneCall:
		return "Prune called"
	case linPrune, linLen:
		return fmt.Sprintf("%s() -> %d", linOpNames[in.op], out.n)
	case linRelease:
		return fmt.Sprintf("Release(o%d)", in.owner)
	}
	return "?"
}

// linRun is one history's shared world: the registry, the owners, and the
// clock that stamps every call and return.
type linRun struct {
	r     *shardreg.Registry[string]
	toks  [linOwners]*owner.Token
	refs  [linOwners]owner.Ref
	ids   map[uint64]int8 // token id → owner index
	clock atomic.Int64
	// minted is how many owners are in play; the rest are alive but unused,
	// which no operation can tell from not minted yet.
	minted atomic.Int32
}

// newLinRun makes a registry of the given cap and mints every owner a
// history may use.
func newLinRun(t *testing.T, capacity int) *linRun {
	r, err := shardreg.New[string](shardreg.WithCap(capacity))
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	w := &linRun{r: r, ids: map[uint64]int8{}}
	for i := range w.toks {
		w.toks[i] = owner.New()
		w.refs[i] = w.toks[i].Ref()
		w.ids[w.toks[i].ID()] = int8(i)
	}
	return w
}

// close releases every owner: tokens left to the garbage collector would
// die at a random later time, in the middle of some other test.
func (w *linRun) close() {
	for _, tok := range w.toks {
		tok.Release()
	}
}

// script records the operations of a scripted history, which may nest: an
// operation run from a hook lies inside the one that fired the hook.
type script struct {
	t   *testing.T
	w   *linRun
	ops []porcupine.Operation
}

func (s *script) do(client int, in linInput) linOutput {
	in.client = int8(client)
	ops := s.w.do(s.t, in)
	for _, op := range ops {
		op.ClientId = client
		op.Metadata = len(s.ops)
		s.ops = append(s.ops, op)
	}
	return ops[len(ops)-1].Output.(linOutput)
}

// do performs one operation on the real registry and records it. A Prune
// records two: a marker stamped at its call, where the model notes which
// owners are dead already, then the Prune itself.
func (w *linRun) do(t *testing.T, in linInput) []porcupine.Operation {
	if got := int(in.client); got >= linClients {
		t.Fatalf("int(in.client) = %v, want < %v", got, linClients)
	}
	name := linNameStrs[in.name]
	var ref owner.Ref
	if in.owner >= 0 {
		ref = w.refs[in.owner]
	}
	var ops []porcupine.Operation
	if in.op == linPrune {
		at := w.clock.Add(1)
		mark := linInput{op: linPruneCall, client: in.client}
		ops = append(ops, porcupine.Operation{Input: mark, Call: at, Output: linOutput{}, Return: at})
	}
	var out linOutput
	call := w.clock.Add(1)
	switch in.op {
	case linRegister:
		out.err = errKind(w.r.Register(name, fmt.Sprint(in.value), ref))
	case linRegisterReady:
		out.err = errKind(w.r.RegisterReady(name, fmt.Sprint(in.value), ref))
	case linOverwrite:
		out.err = errKind(w.r.Overwrite(name, fmt.Sprint(in.value), ref))
	case linMarkReady:
		out.ok = w.r.MarkReady(name, ref)
	case linResolve:
		var e shardreg.Entry[string]
		e, out.ok = w.r.Resolve(name)
		if out.ok {
			out.entry = w.slot(t, e)
		}
	case linUnregister:
		out.ok = w.r.UnregisterOwned(name, ref)
	case linList:
		list := w.r.ListReady()
		if !slices.IsSortedFunc(list, func(a, b shardreg.Entry[string]) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("ListReady is not sorted: %v", entryNames(list))
		}
		for _, e := range list {
			i := slices.Index(linNameStrs[:], e.Name)
			if i < 0 || out.list[i].present {
				t.Errorf("ListReady lists %q unexpectedly: %v", e.Name, entryNames(list))
				continue
			}
			out.list[i] = w.slot(t, e)
		}
	case linPrune:
		out.n = w.r.Prune()
	case linLen:
		out.n = w.r.Len()
	case linRelease:
		// Release promises the token reads dead once it returns, also
		// when it loses a race with another Release of the same token
		// (see TestLinearizabilityReleaseRacingRelease).
		w.toks[in.owner].Release()
	}
	ret := w.clock.Add(1)
	return append(ops, porcupine.Operation{Input: in, Call: call, Output: out, Return: ret})
}

func (w *linRun) slot(t *testing.T, e shardreg.Entry[string]) linSlot {
	var v int32
	if _, err := fmt.Sscan(e.Value, &v); err != nil {
		t.Errorf("value %q: %v", e.Value, err)
	}
	o, ok := w.ids[e.Owner.ID()]
	if !ok {
		t.Errorf("entry %q has an owner the test never minted", e.Name)
	}
	return linSlot{present: true, ready: e.Ready, owner: o, value: v}
}

// linParams sizes one history.
type linParams struct {
	clients, opsPerClient, capacity int
}

// recordHistory runs clients goroutines of random operations on a fresh
// registry and returns what they did, in porcupine's terms.
func recordHistory(t *testing.T, seed uint64, p linParams) []porcupine.Operation {
	w := newLinRun(t, p.capacity)
	defer w.close()
	w.minted.Store(3)

	ops := make([][]porcupine.Operation, p.clients)
	var wg sync.WaitGroup
	barrier := make(chan struct{})
	for c := range p.clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			<-barrier
			for i := range p.opsPerClient {
				in := linInput{
					name:   int8(rng.IntN(linNames)),
					owner:  int8(rng.IntN(int(w.minted.Load()))),
					client: int8(c),
					value:  int32(c*1000 + i),
				}
				switch k := rng.IntN(20); {
				case k < 4:
					in.op = linRegister
				case k < 5:
					in.op = linRegisterReady
				case k < 6:
					in.op = linOverwrite
				case k < 9:
					in.op = linMarkReady
				case k < 12:
					in.op = linResolve
				case k < 14:
					in.op = linUnregister
				case k < 16:
					in.op = linList
				case k < 17:
					in.op = linPrune
				case k < 18:
					in.op = linLen
				default:
					in.op = linRelease
					// A death brings a fresh owner into play, as a
					// supervisor restarts the consumer it killed.
					if m := w.minted.Load(); m < linOwners {
						w.minted.CompareAndSwap(m, m+1)
					}
				}
				for _, op := range w.do(t, in) {
					op.ClientId = c
					ops[c] = append(ops[c], op)
				}
				if rng.IntN(4) == 0 {
					runtime.Gosched() // vary the interleavings
				}
			}
		})
	}
	close(barrier)
	wg.Wait()
	history := slices.Concat(ops...)
	for i := range history {
		history[i].Metadata = i // identifies the operation in explainFailure
	}
	return history
}

// checkHistory fails the test when history has no linearization, and leaves
// porcupine's visualization of it in a file that outlives the test.
func checkHistory(t *testing.T, model porcupine.Model, history []porcupine.Operation, what string) porcupine.CheckResult {
	t.Helper()
	res := porcupine.CheckOperationsTimeout(model, history, 10*time.Second)
	if res != porcupine.Illegal {
		return res
	}
	_, info := porcupine.CheckOperationsVerbose(model, history, 0)
	path := "(no file)"
	if f, err := os.CreateTemp("", "shardreg-linearizability-*.html"); err == nil {
		path = f.Name()
		_ = f.Close()
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			path = fmt.Sprintf("(visualization failed: %v)", err)
		}
	}
	t.Errorf("%s: history of %d operations is not linearizable; visualization: %s", what, len(history), path)
	t.Logf("visualization of the failing history: %s", path)
	explainFailure(t, model, info, history)
	return res
}

// explainFailure logs the longest linearization the checker found, and the
// operations that could not follow it: the place where the history and the
// model part ways.
func explainFailure(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo, history []porcupine.Operation) {
	t.Helper()
	var best []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, lin := range partition {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	describe := func(op porcupine.Operation) string {
		return fmt.Sprintf("c%d [%d, %d] %s", op.ClientId, op.Call, op.Return, describeLinOp(op.Input.(linInput), op.Output.(linOutput)))
	}
	t.Logf("longest linearization (%d of %d operations), with the possible model states after each:", len(best), len(history))
	state := model.Init()
	done := map[any]bool{}
	for _, op := range best {
		_, state = model.Step(state, op.Input, op.Output)
		done[op.Metadata] = true
		t.Logf("  %-60s  %s", describe(op), model.DescribeState(state))
	}
	var rest []porcupine.Operation
	for _, op := range history {
		if !done[op.Metadata] {
			rest = append(rest, op)
		}
	}
	slices.SortFunc(rest, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	t.Logf("operations left over, by call time (the first ones could not follow):")
	for i, op := range rest {
		if i == 12 {
			t.Logf("  ... and %d more", len(rest)-i)
			break
		}
		t.Logf("  %s", describe(op))
	}
}

func TestLinearizability(t *testing.T) {
	// About half a millisecond a history, four times that under -race.
	histories := 4000
	if *long {
		histories = 50000
	} else if testing.Short() {
		histories = 100
	}
	base := rand.Uint64()
	unknown := 0
	began := time.Now()
	for h := range histories {
		seed := base + uint64(h)
		rng := rand.New(rand.NewPCG(seed, 0))
		p := linParams{clients: 4 + rng.IntN(3), opsPerClient: 12 + rng.IntN(12), capacity: 1 + rng.IntN(linNames)}
		history := recordHistory(t, seed, p)
		switch checkHistory(t, linModel(p.capacity), history, fmt.Sprintf("seed %d, %+v", seed, p)) {
		case porcupine.Illegal:
			t.FailNow()
		case porcupine.Unknown:
			unknown++
		}
	}
	t.Logf("%d histories in %v, %d undecided", histories, time.Since(began).Round(time.Millisecond), unknown)
	// A check that times out proves nothing; a few are tolerable, many mean
	// the histories are too large for the checker.
	if unknown > histories/20 {
		t.Fatalf("the checker could not decide %d of %d histories in time, want at most %d", unknown, histories, histories/20)
	}
}
