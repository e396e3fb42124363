package etcdfleet_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// long runs the linearizability check at length:
// go test ./etcdfleet -run Linearizab -args -long (or -long from inside
// etcdfleet/).
var long = flag.Bool("long", false, "check 2,000 fleet histories for linearizability instead of 200")

var linNameStrs = [linNames]string{"n0", "n1", "n2"}

// linParams shape one history.
type linParams struct {
	slots    int // replicas running at once; a crash replaces one
	ops      int // per slot
	capacity int // the fleet cap; linNames or more: none
	// pace, if set, spaces each slot's operations by up to that long.
	pace time.Duration
	// crashEarly has slot 0 start two names and crash: with a pace, the
	// others see its lease expire.
	crashEarly bool
}

// linRecorder records one history: three replicas, each driven by one
// goroutine, on a prefix of their own on a shared etcd.
type linRecorder struct {
	ep     string
	cli    *clientv3.Client // the test's own: gets and expiries
	prefix string
	p      linParams
	life   context.Context // consumers live by it; ends with the history
	base   time.Time

	owners atomic.Int32
	reps   atomic.Int32
	lapsed atomic.Int32 // leases lost without the test's expire

	mu      sync.Mutex
	ops     []porcupine.Operation
	joined  []*etcdfleet.Replica
	kept    []*catalog.Consumer // every consumer started: none dies of being dropped
	failure error
}

// linSlot is the state of one slot's goroutine: its replica incarnation
// and the consumers it started there and has not stopped or cancelled.
type linSlot struct {
	id    int
	rep   int8
	r     *etcdfleet.Replica
	cat   *catalog.Catalog
	held  []linHeld // not stopped or cancelled
	gone  []linHeld // cancelled: dead, or about to be
	lease linLease
	rng   *rand.Rand
}

type linHeld struct {
	k      *catalog.Consumer
	name   int8
	owner  int8
	cancel context.CancelFunc
}

func (h *linRecorder) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failure == nil {
		h.failure = err
	}
}

func (h *linRecorder) record(slot int, in linInput, call time.Time, out linOutput) {
	h.recordAt(slot, in, call, time.Now(), out)
}

func (h *linRecorder) recordAt(slot int, in linInput, call, ret time.Time, out linOutput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{
		ClientId: slot, Input: in, Output: out,
		Call: call.Sub(h.base).Nanoseconds(), Return: ret.Sub(h.base).Nanoseconds(),
	})
}

// incarnate joins a new replica incarnation into slot s.
func (h *linRecorder) incarnate(s *linSlot) error {
	rep := h.reps.Add(1) - 1
	capacity := h.p.capacity
	if capacity >= linNames {
		capacity = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s.lease.reset(time.Now())
	r, err := etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: []string{h.ep}, Prefix: h.prefix, Token: fleetToken, TTL: time.Second, Cap: capacity, Replica: fmt.Sprintf("r%d", rep)})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.joined = append(h.joined, r)
	h.mu.Unlock()
	cat, err := catalog.New(catalog.Config{Claimer: r})
	if err != nil {
		return err
	}
	s.rep, s.r, s.cat, s.held, s.gone = int8(rep), r, cat, nil, nil
	return nil
}

// step runs one random operation on slot s.
func (h *linRecorder) step(s *linSlot) error {
	p := s.rng.IntN(100)
	switch {
	case p < 25 && len(s.held) > 0:
		return h.end(s, s.rng.IntN(2) == 0)
	case p < 60:
		if h.owners.Load() < linOwners {
			return h.start(s, int8(s.rng.IntN(linNames)))
		}
	case p < 90: // a get, below
	case p < 96:
		return h.expire(s)
	default:
		if h.reps.Load() < linReps {
			return h.crash(s)
		}
	}
	return h.get(s, int8(s.rng.IntN(linNames)))
}

func (h *linRecorder) start(s *linSlot, name int8) error {
	owner := int8(h.owners.Add(1) - 1)
	if owner >= linOwners {
		return h.get(s, name)
	}
	in := linInput{op: opStart, name: name, owner: owner, rep: s.rep}
	// A consumer dies of its context's cancellation a moment after it,
	// so a cancelled one may hold its name locally yet.
	in.localHeld = slices.ContainsFunc(s.held, func(c linHeld) bool { return c.name == name }) ||
		slices.ContainsFunc(s.gone, func(c linHeld) bool { return c.name == name && !closed(c.k.Done()) })
	ctx, cancel := context.WithCancel(h.life)
	call := time.Now()
	k, err := s.cat.StartTool(ctx, catalog.Tool{Name: linNameStrs[name], Description: "o" + strconv.Itoa(int(owner))}, bindsec.Plan{Public: true}, echo)
	var out linOutput
	switch {
	case err == nil:
		out.out = outOK
	case errors.Is(err, catalog.ErrDuplicate):
		out.out = outDup
	case errors.Is(err, catalog.ErrCapReached):
		out.out = outCap
	default:
		out.out = outOther
	}
	h.record(s.id, in, call, out)
	if err != nil {
		cancel()
		return nil
	}
	s.held = append(s.held, linHeld{k: k, name: name, owner: owner, cancel: cancel})
	h.mu.Lock()
	h.kept = append(h.kept, k)
	h.mu.Unlock()
	return nil
}

// end stops, or cancels, one of the slot's consumers.
func (h *linRecorder) end(s *linSlot, stop bool) error {
	i := s.rng.IntN(len(s.held))
	c := s.held[i]
	s.held = slices.Delete(s.held, i, i+1)
	in := linInput{op: opCancel, name: c.name, owner: c.owner, rep: s.rep}
	call := time.Now()
	if stop {
		in.op = opStop
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		_ = c.k.Stop(ctx) // its outcome is what the model checks next
	}
	c.cancel()
	h.record(s.id, in, call, linOutput{})
	if !stop {
		s.gone = append(s.gone, c)
	}
	return nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// expire revokes the slot's replica's lease from outside, as the server
// expires the lease of a replica cut off from it; the replica learns of
// it at its next keepalive.
func (h *linRecorder) expire(s *linSlot) error {
	in := linInput{op: opExpire, rep: s.rep}
	call := time.Now()
	out := linOutput{out: outGone}
	if lease := s.r.Lease(); lease != clientv3.NoLease {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		_, err := h.cli.Revoke(ctx, lease)
		switch {
		case err == nil:
			out.out = outOK
			s.lease.revoked[lease] = true
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return fmt.Errorf("revoke: %w", err)
		}
	}
	h.record(s.id, in, call, out)
	return nil
}

// crash crashes the slot's replica and joins a new incarnation in its
// place. The crashed replica's consumers live on, unknown to the fleet.
func (h *linRecorder) crash(s *linSlot) error {
	call := time.Now()
	s.r.Crash()
	h.record(s.id, linInput{op: opCrash, rep: s.rep}, call, linOutput{})
	return h.incarnate(s)
}

func (h *linRecorder) get(s *linSlot, name int8) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	call := time.Now()
	resp, err := h.cli.Get(ctx, h.prefix+"/tools/"+linNameStrs[name])
	if err != nil {
		return err
	}
	out := linOutput{holder: linNoOwner}
	if len(resp.Kvs) == 1 {
		rec, err := etcdfleet.DecodeRecord(resp.Kvs[0].Value)
		if err != nil {
			return err
		}
		o, err := strconv.Atoi(strings.TrimPrefix(rec.Tool.Description, "o"))
		if err != nil {
			return fmt.Errorf("record %+v: %w", rec, err)
		}
		out.holder = int8(o)
	}
	h.record(s.id, linInput{op: opGet, name: name, rep: s.rep}, call, out)
	return nil
}

// recordHistory records one history of p on a fresh prefix of ep; it
// returns the history and how many leases lapsed in it.
func recordHistory(ep string, cli *clientv3.Client, seed uint64, p linParams) ([]porcupine.Operation, int, error) {
	life, end := context.WithCancel(context.Background())
	h := &linRecorder{ep: ep, cli: cli, prefix: fmt.Sprintf("/lin%d", seed), p: p, life: life}
	defer func() {
		for _, r := range h.joined {
			_ = r.Close(context.Background())
		}
		end()
		runtime.KeepAlive(h.kept)
	}()
	slots := make([]*linSlot, p.slots)
	for i := range slots {
		slots[i] = &linSlot{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		if err := h.incarnate(slots[i]); err != nil {
			return nil, 0, err
		}
	}
	h.base = time.Now()
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Go(func() {
			for i := range p.ops {
				// A lapse before the step, recorded before it starts.
				err := h.pollLease(s)
				switch {
				case err != nil:
				case !p.crashEarly || s.id != 0 || i > 2:
					err = h.step(s)
				case i < 2:
					err = h.start(s, int8(s.rng.IntN(linNames)))
				default:
					err = h.crash(s)
				}
				if err == nil {
					// A lapse shows after the step that met it.
					err = h.pollLease(s)
				}
				if err != nil {
					h.fail(fmt.Errorf("slot %d: %w", s.id, err))
					return
				}
				if p.pace > 0 {
					time.Sleep(time.Duration(s.rng.Int64N(int64(p.pace))))
				}
			}
			if err := h.settleLease(s); err != nil {
				h.fail(fmt.Errorf("slot %d: %w", s.id, err))
			}
		})
	}
	wg.Wait()
	return h.ops, int(h.lapsed.Load()), h.failure
}

// TestLinearizable records concurrent histories of starts, stops, deaths,
// lease expiries and crashes on three replicas of one embedded etcd, and
// checks each against the sequential model of linmodel_test.go. In one
// history in ten a replica crashes early, holding names, and the others go
// on for about two seconds, so that its lease expires inside the history.
// The test also counts the histories that needed each removal step (a
// crashed replica's lease expiring, a dead owner's key released): if none
// did, the histories tested nothing of it, and the test fails.
//
// 200 histories, about 7,000 operations, take about 10 s (13 s under
// -race) on 2 cores; -long runs 2,000.
func TestLinearizable(t *testing.T) {
	histories, workers := 200, 4
	if *long {
		histories = 2000
	}
	ep := startEtcd(t)
	cli := client(t, ep)
	base := rand.Uint64()
	began := time.Now()
	var (
		mu                    sync.Mutex
		ops, unknown, illegal int
		expiries, reclaims    int
		lapses                int
		next                  atomic.Int64
		counts                [len(linOpNames)][len(linOutNames)]int
		wg                    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(histories) || t.Failed() {
					return
				}
				seed := base + uint64(i)
				rng := rand.New(rand.NewPCG(seed, 1))
				p := linParams{slots: 3, ops: 8 + rng.IntN(8), capacity: 2 + rng.IntN(2)}
				if i%10 == 9 {
					p.ops, p.pace, p.crashEarly = 16, 200*time.Millisecond, true
				}
				history, lapsed, err := recordHistory(ep, cli, seed, p)
				if err != nil {
					t.Errorf("history %d (seed %d): %v", i, seed, err)
					return
				}
				res := checkHistory(t, linModel(linStep, p.capacity), history, fmt.Sprintf("seed %d, %+v", seed, p))
				// Coverage: a history that the model without a removal
				// step rejects is one in which that step was seen.
				expiry := res == porcupine.Ok && !porcupine.CheckOperations(linModelFrozen(linStep, p.capacity, frozenExpiry), history)
				reclaim := res == porcupine.Ok && !porcupine.CheckOperations(linModelFrozen(linStep, p.capacity, frozenReclaim), history)
				mu.Lock()
				if expiry {
					expiries++
				}
				if reclaim {
					reclaims++
				}
				ops += len(history)
				lapses += lapsed
				for _, op := range history {
					counts[op.Input.(linInput).op][op.Output.(linOutput).out]++
				}
				switch res {
				case porcupine.Unknown:
					unknown++
				case porcupine.Illegal:
					illegal++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d histories, %d operations, in %v: %d not linearizable, %d undecided", histories, ops, time.Since(began).Round(time.Millisecond), illegal, unknown)
	t.Logf("a crashed replica's lease seen to expire in %d histories, a dead owner's key seen released in %d", expiries, reclaims)
	t.Logf("%d leases lapsed without an expire (stalls longer than the TTL), recorded as expires", lapses)
	for op, byOut := range counts {
		t.Logf("  %-6s %v", linOpNames[op], byOut)
	}
	if !t.Failed() && (expiries == 0 || reclaims == 0) {
		t.Errorf("no history saw a lease expire after a crash (%d) or a dead owner's key released (%d): the histories test neither step", expiries, reclaims)
	}
	if unknown > histories/20 {
		t.Errorf("%d histories the checker could not decide in time", unknown)
	}
}
