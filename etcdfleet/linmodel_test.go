package etcdfleet_test

import (
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential model of the fleet, for porcupine. It knows the claim keys
// of a few names, who holds each (an owner, on a replica incarnation), and
// which owners and incarnations are dead. Operations:
//
//	start(rep, name, owner)  a consumer start on replica rep: ok, ErrDuplicate,
//	                         ErrCapReached, or another error
//	stop(name, owner)        Stop: returns once the release is done
//	cancel(name, owner)      the consumer's context is cancelled: it dies
//	crash(rep)               Replica.Crash: no release, no revoke
//	expire(rep)              the replica's lease expires behind its back (a
//	                         partition): an outside client revokes it; or
//	                         it lapsed under a stall longer than the TTL,
//	                         and the recorder, seeing the replica lose a
//	                         session it did not revoke, records an expire
//	                         whose window holds the moment (linlease_test.go)
//	get(name)                a linearizable Get of the key: who holds it
//
// Two removals are steps of their own, which may come at any moment after
// their cause and which no operation observes directly: a dead owner's key
// goes when the catalog's reclaim releases it, and a crashed replica's keys
// go when its lease expires. The model therefore holds, after every
// operation, the set of states the history so far could have left
// (porcupine's NondeterministicModel does the power-set construction), and
// before each step any subset of the removable keys may go.
//
// Everything else is exact: a start succeeds only on a free name below the
// cap, and is refused as a duplicate only while the key exists, or for the
// cap only while the kind holds the cap; a stop deletes the key only while
// it is the one its own start created (the create-revision fence); an
// expire deletes exactly the replica's keys, at its instant.
const (
	linNames   = 3
	linOwners  = 64 // fits linState.dead
	linReps    = 8  // incarnations; fits linState.crashed
	linNoOwner = -1
)

type linOp uint8

const (
	opStart linOp = iota
	opStop
	opCancel
	opCrash
	opExpire
	opGet
)

var linOpNames = [...]string{"start", "stop", "cancel", "crash", "expire", "get"}

// Start outcomes; for expire, outOK (revoked) or outGone (no lease to
// revoke).
const (
	outOK uint8 = iota
	outDup
	outCap
	outOther // a lost session, a dead owner: allowed after an expire
	outGone
)

var linOutNames = [...]string{"ok", "ErrDuplicate", "ErrCapReached", "other error", "no lease"}

type linInput struct {
	op    linOp
	name  int8
	owner int8
	rep   int8
	// localHeld: an earlier consumer of name on the same replica was
	// alive at the start's call, as far as the test knows: not stopped,
	// and not cancelled with its Done closed. If the replica's lease was
	// expired, that consumer may still hold the name in the replica's own
	// catalog (it is killed only once the replica notices), and the
	// catalog refuses the start as a duplicate before asking etcd.
	localHeld bool
}

type linOutput struct {
	out    uint8
	holder int8 // get: the owner the key names, or linNoOwner
}

type linKey struct {
	present    bool
	owner, rep int8
}

// linState is one possible state: a comparable value.
type linState struct {
	dead     uint64 // owners stopped, cancelled, or whose start failed late
	crashed  uint8  // incarnations
	expired  uint8  // incarnations whose lease was expired once
	keys     [linNames]linKey
	capacity int8
	// frozen turns removal steps off, for the coverage counts of
	// TestLinearizable: a history that needs them took them.
	frozen uint8
}

// Removal steps a linState may take.
const (
	frozenExpiry  uint8 = 1 << iota // a crashed replica's lease never expires
	frozenReclaim                   // a dead owner's key is never released
)

func (s linState) count() int {
	n := 0
	for _, k := range s.keys {
		if k.present {
			n++
		}
	}
	return n
}

func (s linState) removable(k linKey) bool {
	return k.present && (s.frozen&frozenReclaim == 0 && s.dead&(1<<k.owner) != 0 ||
		s.frozen&frozenExpiry == 0 && s.crashed&(1<<k.rep) != 0)
}

// removals returns every state s can become by the removal of any subset
// of its removable keys, s itself included.
func (s linState) removals() []linState {
	var idx []int
	for i, k := range s.keys {
		if s.removable(k) {
			idx = append(idx, i)
		}
	}
	out := make([]linState, 0, 1<<len(idx))
	for subset := range 1 << len(idx) {
		t := s
		for j, i := range idx {
			if subset&(1<<j) != 0 {
				t.keys[i] = linKey{}
			}
		}
		out = append(out, t)
	}
	return out
}

// linSpec is the sequential specification of one step on one state: the
// states it may lead to, none if out is impossible. The bugs the checker
// must catch are bent versions of it, in linmutants_test.go.
type linSpec func(s linState, in linInput, out linOutput) []linState

func linStep(s linState, in linInput, out linOutput) []linState {
	k := s.keys[in.name]
	expired := s.expired&(1<<in.rep) != 0
	switch in.op {
	case opStart:
		free := !k.present && s.count() < int(s.capacity)
		switch out.out {
		case outOK:
			if !free {
				return nil
			}
			s.keys[in.name] = linKey{present: true, owner: in.owner, rep: in.rep}
			return []linState{s}
		case outDup:
			if k.present || in.localHeld && expired {
				return []linState{s}
			}
		case outCap:
			if !k.present && s.count() >= int(s.capacity) {
				return []linState{s}
			}
		case outOther:
			// The session was lost under the claim: nothing was
			// written, or the key was, for a consumer that is dead and
			// whose key goes with the lease or its release.
			if !expired {
				return nil
			}
			s.dead |= 1 << in.owner
			if !free {
				return []linState{s}
			}
			t := s
			t.keys[in.name] = linKey{present: true, owner: in.owner, rep: in.rep}
			return []linState{s, t}
		}
		return nil
	case opStop:
		if k.present && k.owner == in.owner {
			s.keys[in.name] = linKey{}
		}
		s.dead |= 1 << in.owner
		return []linState{s}
	case opCancel:
		s.dead |= 1 << in.owner
		return []linState{s}
	case opCrash:
		s.crashed |= 1 << in.rep
		return []linState{s}
	case opExpire:
		s.expired |= 1 << in.rep
		if out.out == outOK {
			for i, k := range s.keys {
				if k.present && k.rep == in.rep {
					s.keys[i] = linKey{}
				}
			}
		}
		return []linState{s}
	case opGet:
		want := int8(linNoOwner)
		if k.present {
			want = k.owner
		}
		if out.holder != want {
			return nil
		}
		return []linState{s}
	}
	panic(fmt.Sprintf("unknown op %d", in.op))
}

var linSeed = maphash.MakeSeed()

// linModel is spec, with removals before every step, as a porcupine model
// for a fleet whose cap is capacity (linNames or more: none).
func linModel(spec linSpec, capacity int) porcupine.Model {
	return linModelFrozen(spec, capacity, 0)
}

// linModelFrozen is linModel without the removal steps frozen names.
func linModelFrozen(spec linSpec, capacity int, frozen uint8) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{capacity: int8(capacity), frozen: frozen}} },
		Step: func(state, input, output any) []any {
			var next []any
			for _, s := range state.(linState).removals() {
				for _, t := range spec(s, input.(linInput), output.(linOutput)) {
					next = append(next, t)
				}
			}
			return next
		},
		Hash:              func(state any) uint64 { return maphash.Comparable(linSeed, state.(linState)) },
		DescribeOperation: func(in, out any) string { return describeLinOp(in.(linInput), out.(linOutput)) },
		DescribeState:     func(state any) string { return describeLinState(state.(linState)) },
	}
	return nm.ToModel()
}

func describeLinOp(in linInput, out linOutput) string {
	switch in.op {
	case opStart:
		held := ""
		if in.localHeld {
			held = ", held locally"
		}
		return fmt.Sprintf("start(r%d, n%d, o%d%s) -> %s", in.rep, in.name, in.owner, held, linOutNames[out.out])
	case opStop, opCancel:
		return fmt.Sprintf("%s(n%d, o%d)", linOpNames[in.op], in.name, in.owner)
	case opCrash:
		return fmt.Sprintf("crash(r%d)", in.rep)
	case opExpire:
		return fmt.Sprintf("expire(r%d) -> %s", in.rep, linOutNames[out.out])
	case opGet:
		if out.holder == linNoOwner {
			return fmt.Sprintf("get(n%d) -> none", in.name)
		}
		return fmt.Sprintf("get(n%d) -> o%d", in.name, out.holder)
	}
	return "?"
}

func describeLinState(s linState) string {
	var b strings.Builder
	for i, k := range s.keys {
		if i > 0 {
			b.WriteString(" ")
		}
		if !k.present {
			fmt.Fprintf(&b, "n%d:-", i)
			continue
		}
		fmt.Fprintf(&b, "n%d:o%d@r%d", i, k.owner, k.rep)
		if s.removable(k) {
			b.WriteString("†")
		}
	}
	return b.String()
}
