package shardreg_test

import (
	"fmt"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model must reject histories that break the rules it encodes, or a
// passing check would prove nothing. Each mutant bends one rule, and must be
// told apart from the model:
//
//   - a mutant stricter than the spec (or just different) must reject one of
//     the sequential histories of the real registry, which the model
//     accepts;
//   - a mutant looser than the spec accepts whatever the model accepts, so
//     no history of a correct registry can tell it apart. For each, a
//     hand-written history breaks the rule it drops: the model must reject
//     it and the mutant accept it, so that it is that rule which rejects it.
//
// Reclaim timing changed two of the old mutants. Once a dead entry may be
// reclaimed at any moment, a model whose Resolve does not remove the dead
// entry it meets is no longer a mutant at all: Resolve never waits, so it
// leaves the entry when a listing holds writes off, and the model says just
// that. A register that does not sweep is caught only where nothing else
// may reclaim just before it either.
func TestLinearizabilityModelRejectsMutants(t *testing.T) {
	const capacity = 2
	var histories [][]porcupine.Operation
	for seed := range uint64(100) {
		histories = append(histories, recordHistory(t, seed, linParams{clients: 1, opsPerClient: 100, capacity: capacity}))
	}
	for i, h := range histories {
		if got := checkHistory(t, linModel(capacity), h, fmt.Sprintf("sequential history %d", i)); got != porcupine.Ok {
			t.Fatalf("sequential history %d: the checker returned %q, want %q", i, got, porcupine.Ok)
		}
	}
	step := func(s linState, in linInput, out linOutput) (bool, linState) { return linStep(capacity, s, in, out) }
	bend := func(bent func(s linState, in linInput, out linOutput) (ok, handled bool, next linState)) linSpec {
		return linSpec{step: func(s linState, in linInput, out linOutput) (bool, linState) {
			if ok, handled, next := bent(s, in, out); handled {
				return ok, next
			}
			return step(s, in, out)
		}}
	}
	isRegister := func(op linOp) bool { return op <= linOverwrite }

	strict := map[string]linSpec{
		"UnregisterOwned removes any owner's entry": bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
			if in.op == linUnregister && s.entries[in.name].present {
				s.entries[in.name] = linSlot{}
				return out.ok, true, s
			}
			return false, false, s
		}),
		"Len counts live entries only": bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
			if in.op == linLen {
				live := 0
				for _, e := range s.entries {
					if e.present && !s.isDead(e) {
						live++
					}
				}
				return out.n == live, true, s
			}
			return false, false, s
		}),
		// Nothing reclaims right before a register, and a register that
		// finds the registry full refuses: a dead entry keeps its slot
		// against it.
		"a full register does not sweep": func() linSpec {
			spec := bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
				if isRegister(in.op) && !s.entries[in.name].present && s.count() >= capacity && s.isAlive(in.owner) {
					return out.err == errCap, true, s
				}
				return false, false, s
			})
			spec.reclaimBefore = func(op linOp) bool { return !isRegister(op) }
			return spec
		}(),
	}
	for name, spec := range strict {
		t.Run(name, func(t *testing.T) {
			model := linSetModel(spec)
			caught := 0
			for _, h := range histories {
				if !porcupine.CheckOperations(model, h) {
					caught++
				}
			}
			t.Logf("%d of %d histories reject the mutant", caught, len(histories))
			if caught == 0 {
				t.Error("no history tells the mutant from the model")
			}
		})
	}

	do := func(op linOp, name, o int8) linInput { return linInput{op: op, name: name, owner: o} }
	ok := linOutput{}
	loose := map[string]struct {
		spec  linSpec
		wrong []porcupine.Operation
	}{
		"ListReady lists dead entries": {
			bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
				if in.op == linList {
					var want [linNames]linSlot
					for i, e := range s.entries {
						if e.ready {
							want[i] = e
						}
					}
					return out.list == want, true, s
				}
				return false, false, s
			}),
			sequentialHistory(
				linCall{do(linRegisterReady, 0, 0), ok},
				linCall{do(linRelease, 0, 0), ok},
				linCall{do(linList, 0, 0), linOutput{list: [linNames]linSlot{{present: true, ready: true, owner: 0}}}},
			),
		},
		"ErrCapReached while a dead entry holds a slot": {
			bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
				if isRegister(in.op) && !s.entries[in.name].present && s.count() >= capacity && s.isAlive(in.owner) {
					return out.err == errCap, out.err == errCap, s
				}
				return false, false, s
			}),
			sequentialHistory(
				linCall{do(linRegisterReady, 0, 0), ok},
				linCall{do(linRegisterReady, 1, 1), ok},
				linCall{do(linRelease, 0, 1), ok},
				linCall{do(linRegister, 2, 2), linOutput{err: errCap}},
			),
		},
		"Prune may leave an entry dead at its call": {
			bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
				if in.op == linPrune && s.prunes[in.client].pending {
					n := s.prunes[in.client].reclaims
					s.prunes[in.client] = pendingPrune{}
					return out.n <= int(n), true, s
				}
				return false, false, s
			}),
			// The entry is still counted after the Prune.
			sequentialHistory(
				linCall{do(linRegisterReady, 0, 0), ok},
				linCall{do(linRelease, 0, 0), ok},
				linCall{do(linPrune, 0, 0), linOutput{n: 0}},
				linCall{do(linLen, 0, 0), linOutput{n: 1}},
			),
		},
		"Prune's count is not checked": {
			bend(func(s linState, in linInput, out linOutput) (bool, bool, linState) {
				if in.op == linPrune {
					ok, next := step(s, in, linOutput{n: 0})
					return ok, true, next
				}
				return false, false, s
			}),
			// The dead owner's late stop removed the only dead entry
			// before Prune was called: Prune removed nothing.
			sequentialHistory(
				linCall{do(linRegisterReady, 0, 0), ok},
				linCall{do(linRelease, 0, 0), ok},
				linCall{do(linUnregister, 0, 0), linOutput{ok: true}},
				linCall{do(linPrune, 0, 0), linOutput{n: 1}},
			),
		},
	}
	for name, m := range loose {
		t.Run(name, func(t *testing.T) {
			requireRejected(t, linModel(capacity), m.wrong, name)
			if !porcupine.CheckOperations(linSetModel(m.spec), m.wrong) {
				t.Error("the mutant rejects the history too: it tests some other rule: porcupine.CheckOperations(linSetModel(m.spec), m.wrong) = false, want true")
			}
		})
	}
}
