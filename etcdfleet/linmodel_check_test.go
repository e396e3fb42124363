package etcdfleet_test

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// seq makes a sequential history: each operation returns before the next
// is called, so the model has exactly one order to try.
func seq(steps ...porcupine.Operation) []porcupine.Operation {
	for i := range steps {
		steps[i].Call, steps[i].Return = int64(2*i), int64(2*i+1)
	}
	return steps
}

func start(rep, name, owner int8, out uint8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opStart, rep: rep, name: name, owner: owner}, Output: linOutput{out: out}}
}

func stop(name, owner int8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opStop, name: name, owner: owner}, Output: linOutput{}}
}

func cancelOp(name, owner int8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opCancel, name: name, owner: owner}, Output: linOutput{}}
}

func crash(rep int8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opCrash, rep: rep}, Output: linOutput{}}
}

func expire(rep int8, out uint8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opExpire, rep: rep}, Output: linOutput{out: out}}
}

func get(name, holder int8) porcupine.Operation {
	return porcupine.Operation{Input: linInput{op: opGet, name: name}, Output: linOutput{holder: holder}}
}

// The model accepts what the fleet does and rejects each bug the fleet
// could have: it is the checker's edge, so it is tested on its own.
func TestLinModel(t *testing.T) {
	const none = linNoOwner
	for _, c := range []struct {
		name     string
		capacity int
		history  []porcupine.Operation
		ok       bool
	}{
		{"duplicate then stop frees", linNames, seq(start(0, 0, 0, outOK), start(1, 0, 1, outDup), stop(0, 0), start(1, 0, 2, outOK), get(0, 2)), true},
		{"a crashed replica's name frees at some point", linNames, seq(start(0, 0, 0, outOK), crash(0), start(1, 0, 1, outDup), start(1, 0, 2, outOK), get(0, 2)), true},
		{"a dead owner's name frees at some point", linNames, seq(start(0, 0, 0, outOK), cancelOp(0, 0), get(0, 0), start(1, 0, 1, outDup), get(0, none), start(1, 0, 2, outOK)), true},
		{"an expiry frees at once; the late stop is fenced", linNames, seq(start(0, 0, 0, outOK), expire(0, outOK), get(0, none), start(1, 0, 1, outOK), stop(0, 0), get(0, 1)), true},
		{"a start after an expiry may fail", linNames, seq(expire(0, outOK), start(0, 0, 0, outOther), get(0, 0), start(1, 0, 1, outDup), start(1, 0, 2, outOK)), true},
		{"cap", 2, seq(start(0, 0, 0, outOK), start(1, 1, 1, outOK), start(2, 2, 2, outCap), start(2, 0, 3, outDup), stop(1, 1), start(2, 2, 4, outOK)), true},
		{"a crashed replica's slot frees at some point", 2, seq(start(0, 0, 0, outOK), start(0, 1, 1, outOK), crash(0), start(2, 2, 2, outCap), start(2, 2, 3, outOK)), true},

		{"two holders: a blind put", linNames, seq(start(0, 0, 0, outOK), start(1, 0, 1, outOK)), false},
		{"a stale stop deletes the successor: no fence", linNames, seq(start(0, 0, 0, outOK), expire(0, outOK), start(1, 0, 1, outOK), stop(0, 0), get(0, none)), false},
		{"over the cap", 2, seq(start(0, 0, 0, outOK), start(1, 1, 1, outOK), start(2, 2, 2, outOK)), false},
		{"refused for a cap not full", 2, seq(start(0, 0, 0, outOK), start(1, 1, 1, outCap)), false},
		{"a live owner's key vanishes", linNames, seq(start(0, 0, 0, outOK), get(0, none)), false},
		{"a live replica's slot frees", 1, seq(start(0, 0, 0, outOK), start(1, 1, 1, outOK)), false},
		{"a stop returns before its release", linNames, seq(start(0, 0, 0, outOK), stop(0, 0), get(0, 0)), false},
		{"a stop that deletes nothing", linNames, seq(start(0, 0, 0, outOK), stop(0, 0), start(1, 0, 1, outDup)), false},
		{"an expiry that deletes nothing", linNames, seq(start(0, 0, 0, outOK), expire(0, outOK), start(1, 0, 1, outDup)), false},
		{"a duplicate of a free name", linNames, seq(get(0, none), start(0, 0, 0, outDup)), false},
		{"a claim that resurrects a dead name", linNames, seq(start(0, 0, 0, outOK), crash(0), get(0, none), get(0, 0)), false},
		{"an error with the session intact", linNames, seq(start(0, 0, 0, outOther)), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(linModel(linStep, c.capacity), c.history); got != c.ok {
				t.Fatalf("linearizable: %v, want %v", got, c.ok)
			}
		})
	}
}
