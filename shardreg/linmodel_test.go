package shardreg_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/anishathalye/porcupine"
	"github.com/livereg/livereg/shardreg"
)

// The linearizability check keeps the pools tiny: with few names and a cap
// below the name count, concurrent operations collide on names, on slots and
// on owners, and the checker's search stays small.
const (
	linNames   = 3
	linOwners  = 16 // fits linState.alive
	linClients = 8  // fits linState.prunes
)

var linNameStrs = [linNames]string{"a", "b", "c"}

type linOp uint8

const (
	linRegister linOp = iota
	linRegisterReady
	linOverwrite
	linMarkReady
	linResolve
	linUnregister
	linList
	linPruneCall
	linPrune
	linLen
	linRelease
)

var linOpNames = [...]string{"Register", "RegisterReady", "Overwrite", "MarkReady", "Resolve", "UnregisterOwned", "ListReady", "Prune call", "Prune", "Len", "Release"}

// Register outcomes, as the model compares them.
const (
	errNone uint8 = iota
	errDuplicate
	errCap
	errDead
	errOther
)

var errNames = [...]string{"ok", "ErrDuplicate", "ErrCapReached", "ErrDeadOwner", "unexpected error"}

func errKind(err error) uint8 {
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, shardreg.ErrDuplicate):
		return errDuplicate
	case errors.Is(err, shardreg.ErrCapReached):
		return errCap
	case errors.Is(err, shardreg.ErrDeadOwner):
		return errDead
	}
	return errOther
}

type linInput struct {
	op     linOp
	name   int8
	owner  int8
	client int8 // the caller; a Prune and its call marker share it
	value  int32
}

// linSlot is what one name holds. The zero linSlot is an empty name.
type linSlot struct {
	present, ready bool
	owner          int8
	value          int32
}

type linOutput struct {
	err   uint8
	ok    bool
	n     int
	entry linSlot           // Resolve's hit
	list  [linNames]linSlot // ListReady, indexed by name
}

// The registry's spec makes reclaiming a dead-owner entry a step of its own
// (see doc.go): it may happen at any moment after the owner's death, inside
// whichever operation meets the entry or from outside, and observers (Len,
// the dead owner's UnregisterOwned, the cap) see the states in between. The
// model therefore does not know, after a death, which dead entries are still
// held. Its state is the set of registry states the history so far could
// have left (a power-set construction): before every operation's step the
// set is closed under reclaiming any subset of the dead-owner entries, the
// step runs on every member, and only the members in which the observed
// output was possible survive. A history is linearizable when some order of
// its operations keeps the set non-empty to the end.
//
// Everything but the timing of reclaims stays exact, and so does what an
// operation promises about reclaims by its own linearization point (see
// linStep): ErrCapReached needs
// every held entry live; Prune leaves no entry of an owner that was dead at
// its call, and counts no more removals than there were reclaims since;
// ListReady lists no dead entry, and promises no more.

// linState is one possible registry state: a plain comparable value, so
// that a step copies it and a set can deduplicate it.
type linState struct {
	alive   uint16
	entries [linNames]linSlot
	// prunes holds, per client, the Prune that has been called and has not
	// taken effect yet. A Prune promises something about the owners dead at
	// its call, an instant the model sees only through the marker
	// operation stamped there.
	prunes [linClients]pendingPrune
}

// pendingPrune is a Prune between its call and its linearization point.
type pendingPrune struct {
	pending bool
	// dead is the owners dead at the call: none of their entries may be
	// left once the Prune has taken effect.
	dead uint16
	// reclaims counts the reclaims since the call. Every entry the Prune
	// removes is one of them, so it bounds the count the Prune returns.
	reclaims uint8
}

func (s linState) isAlive(o int8) bool { return s.alive&(1<<o) != 0 }

func (s linState) count() int {
	n := 0
	for _, e := range s.entries {
		if e.present {
			n++
		}
	}
	return n
}

func (s linState) isDead(e linSlot) bool { return e.present && !s.isAlive(e.owner) }

func (s linState) holdsDead() bool {
	for _, e := range s.entries {
		if s.isDead(e) {
			return true
		}
	}
	return false
}

// reclaim removes name i's dead-owner entry as a reclaim step: every
// pending Prune may have been the one that took it.
func (s *linState) reclaim(i int) {
	s.entries[i] = linSlot{}
	for c := range s.prunes {
		if p := &s.prunes[c]; p.pending && p.reclaims < ^uint8(0) {
			p.reclaims++
		}
	}
}

// appendReclaims appends to out every state that s can become by
// reclaiming any subset of its dead-owner entries, s itself included.
func (s linState) appendReclaims(out []linState) []linState {
	var dead [linNames]int
	n := 0
	for i, e := range s.entries {
		if s.isDead(e) {
			dead[n] = i
			n++
		}
	}
	for subset := range 1 << n {
		t := s
		for j, i := range dead[:n] {
			if subset&(1<<j) != 0 {
				t.reclaim(i)
			}
		}
		out = append(out, t)
	}
	return out
}

// linStep is the sequential specification of one operation on one possible
// state: the same rules as refModel, except that the reclaims refModel makes
// inside ListReady, Prune and a full Register are not made here; the set
// construction around linStep supplies them, at every moment.
func linStep(capacity int, s linState, in linInput, out linOutput) (bool, linState) {
	cur := s.entries[in.name]
	switch in.op {
	case linRegister, linRegisterReady, linOverwrite:
		overwrite := in.op == linOverwrite
		var want uint8
		switch {
		case !s.isAlive(in.owner):
			want = errDead
		case cur.present && !overwrite && s.isAlive(cur.owner):
			want = errDuplicate
		case cur.present:
			// A takeover replaces in place and keeps the slot.
		case s.count() >= capacity:
			// Register sweeps before it refuses: ErrCapReached is an
			// answer only where every held entry is live. Where a dead
			// entry still holds a slot, neither answer is: the register
			// succeeds, or is refused, in a state whose reclaims have
			// happened, and the set holds that state too.
			if s.holdsDead() {
				return false, s
			}
			want = errCap
		}
		if out.err != want {
			return false, s
		}
		if want == errNone {
			s.entries[in.name] = linSlot{present: true, ready: in.op != linRegister, owner: in.owner, value: in.value}
		}
		return true, s
	case linMarkReady:
		ok := cur.present && cur.owner == in.owner && s.isAlive(in.owner)
		if ok {
			s.entries[in.name].ready = true
		}
		return out.ok == ok, s
	case linResolve:
		// Resolve misses a dead entry. It may reclaim it too, or leave it
		// when a listing holds writes off, so that it never waits: the
		// reclaim is a step of its own, which the set construction
		// supplies.
		if !cur.present || !cur.ready || s.isDead(cur) {
			return !out.ok, s
		}
		return out.ok && out.entry == cur, s
	case linUnregister:
		// Ownership alone decides, dead owner or not: until its entry is
		// reclaimed, a dead owner's late stop still removes it.
		ok := cur.present && cur.owner == in.owner
		if ok {
			s.entries[in.name] = linSlot{}
		}
		return out.ok == ok, s
	case linList:
		// Exactly the live, ready entries at its point. That it reclaimed
		// the dead ones is not promised: a listing served from the cache
		// reclaims nothing, and the scan that follows a reclaim passes
		// over entries whose owners died meanwhile without removing them.
		var want [linNames]linSlot
		for i, e := range s.entries {
			if e.ready && !s.isDead(e) {
				want[i] = e
			}
		}
		return out.list == want, s
	case linPruneCall:
		if s.prunes[in.client].pending {
			return false, s
		}
		s.prunes[in.client] = pendingPrune{pending: true, dead: ^s.alive}
		return true, s
	case linPrune:
		p := s.prunes[in.client]
		if !p.pending {
			return false, s // its call comes first
		}
		// Prune visits every entry, so an entry whose owner was dead when
		// it was called is gone by the time it returns, removed by it or by
		// anybody else; an owner that died during it may or may not have
		// lost its entry. It counts only its own removals, each a reclaim
		// since its call.
		for _, e := range s.entries {
			if e.present && p.dead&(1<<e.owner) != 0 {
				return false, s
			}
		}
		s.prunes[in.client] = pendingPrune{}
		return out.n >= 0 && out.n <= int(p.reclaims), s
	case linLen:
		// Dead entries count until they are reclaimed, as the cap does.
		return out.n == s.count(), s
	case linRelease:
		s.alive &^= 1 << in.owner
		return true, s
	}
	panic(fmt.Sprintf("unknown op %d", in.op))
}

// linStates is the model's state: the registry states the operations
// linearized so far could have left. It is canonical (members sorted by
// their encoding, no duplicates) and key is that encoding, so that two sets
// are equal exactly when their keys are, and porcupine's cache can hash and
// compare them.
type linStates struct {
	key     string
	members []linState
}

const linStateLen = 2 + linNames*6 + linClients*4

func (s *linState) encode() [linStateLen]byte {
	var b [linStateLen]byte
	b[0], b[1] = byte(s.alive), byte(s.alive>>8)
	i := 2
	for _, e := range s.entries {
		if e.present {
			b[i] = 1
		}
		if e.ready {
			b[i] |= 2
		}
		b[i+1] = byte(e.owner)
		b[i+2], b[i+3], b[i+4], b[i+5] = byte(e.value), byte(e.value>>8), byte(e.value>>16), byte(e.value>>24)
		i += 6
	}
	for _, p := range s.prunes {
		if p.pending {
			b[i] = 1
		}
		b[i+1], b[i+2], b[i+3] = byte(p.dead), byte(p.dead>>8), p.reclaims
		i += 4
	}
	return b
}

// newLinStates makes the canonical set of the given members.
func newLinStates(members []linState) linStates {
	type keyed struct {
		key [linStateLen]byte
		s   linState
	}
	ks := make([]keyed, len(members))
	for i := range members {
		ks[i] = keyed{members[i].encode(), members[i]}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return bytes.Compare(a.key[:], b.key[:]) })
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return a.key == b.key })
	key := make([]byte, 0, len(ks)*linStateLen)
	out := make([]linState, len(ks))
	for i, k := range ks {
		key = append(key, k.key[:]...)
		out[i] = k.s
	}
	return linStates{key: string(key), members: out}
}

var linHashSeed = maphash.MakeSeed()

// linSpec is a sequential specification given one possible state at a
// time; linSetModel lifts it to sets. The mutants below bend it.
type linSpec struct {
	step func(s linState, in linInput, out linOutput) (bool, linState)
	// reclaimBefore reports whether reclaims may happen before op's step.
	// The registry's spec: always, since a reclaim may come at any moment.
	reclaimBefore func(op linOp) bool
}

// stepSet runs one operation on a set of states: reclaims first, then the
// step on every member, keeping the members that explain out.
func (spec linSpec) stepSet(set linStates, in linInput, out linOutput) (bool, linStates) {
	var before []linState
	if spec.reclaimBefore == nil || spec.reclaimBefore(in.op) {
		for _, s := range set.members {
			before = s.appendReclaims(before)
		}
	} else {
		before = set.members
	}
	var after []linState
	for _, s := range before {
		if ok, next := spec.step(s, in, out); ok {
			after = append(after, next)
		}
	}
	if len(after) == 0 {
		return false, set
	}
	return true, newLinStates(after)
}

func linModel(capacity int) porcupine.Model {
	return linSetModel(linSpec{step: func(s linState, in linInput, out linOutput) (bool, linState) {
		return linStep(capacity, s, in, out)
	}})
}

func linSetModel(spec linSpec) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return newLinStates([]linState{{alive: 1<<linOwners - 1}}) },
		Step: func(state, input, output any) (bool, any) {
			return spec.stepSet(state.(linStates), input.(linInput), output.(linOutput))
		},
		Equal:                     func(a, b any) bool { return a.(linStates).key == b.(linStates).key },
		Hash:                      func(state any) uint64 { return maphash.String(linHashSeed, state.(linStates).key) },
		DescribeOperationMetadata: func(any) string { return "" },
		DescribeOperation: func(input, output any) string {
			return describeLinOp(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return describeLinStates(state.(linStates)) },
	}
}
