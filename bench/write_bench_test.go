package bench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
)

// maxWriters bounds the goroutines of a write workload: each needs its own
// owner and names, made during setup. RunParallel starts GOMAXPROCS of them.
const maxWriters = 64

// writer is one consumer that registers and unregisters its own names. Its
// state outlives a call of the benchmark function, so that every call
// continues where the previous one stopped and the registry keeps its size.
type writer struct {
	tok        *owner.Token
	names      []string
	next       int
	registered bool // names[next] is in the registry
}

func newWriters(slot int) []*writer {
	const perWriter = 256
	ws := make([]*writer, maxWriters)
	for w := range ws {
		ws[w] = &writer{tok: owner.New(), names: make([]string, perWriter)}
		for j := range ws[w].names {
			ws[w].names[j] = toolName(slot + w*perWriter + j)
		}
	}
	return ws
}

func releaseWriters(ws []*writer) {
	for _, w := range ws {
		w.tok.Release()
	}
}

// step is one write: it registers its next name or, if that one is in,
// unregisters it and moves on, so writes alternate register-new and
// unregister-owned. ready also marks the entry ready in the same write.
func (w *writer) step(r Registry, ready bool) error {
	name := w.names[w.next]
	if w.registered {
		if !r.UnregisterOwned(name, w.tok.Ref()) {
			return fmt.Errorf("unregister %s: not removed", name)
		}
		w.registered = false
		w.next = (w.next + 1) % len(w.names)
		return nil
	}
	reg := r.Register
	if ready {
		reg = r.RegisterReady
	}
	if err := reg(name, 0, w.tok.Ref()); err != nil {
		return err
	}
	w.registered = true
	return nil
}

// claim hands each goroutine of one RunParallel call its own writer.
func claim(b *testing.B, ws []*writer, slot *atomic.Int32) *writer {
	i := int(slot.Add(1)) - 1
	if i >= len(ws) {
		b.Fatalf("more than %d goroutines", len(ws))
	}
	return ws[i]
}

// BenchmarkMixed resolves and writes from every goroutine over 10,000 live
// entries. mix=99-1 is 99% resolve and 1% writes; mix=90-5-5 is 90% resolve,
// 5% register-new, 5% unregister-owned. Writes in 99-1 also alternate
// register and unregister, so that the registry keeps its size.
func BenchmarkMixed(b *testing.B) {
	const n = 10_000
	type fixture struct {
		r    Registry
		keys []string
		ws   []*writer
	}
	for _, mix := range []struct {
		name       string
		writeEvery int
	}{{"99-1", 100}, {"90-5-5", 10}} {
		for _, impl := range Registries() {
			run(b, fmt.Sprintf("mix=%s/n=%d/impl=%s", mix.name, n, impl.Name), func(b *testing.B) (fixture, func()) {
				r := impl.New(n + maxWriters)
				keys := fill(b, r, n)
				ws := newWriters(2_000_000)
				return fixture{r, keys, ws}, func() { releaseWriters(ws) }
			}, func(b *testing.B, f fixture) {
				var st stagger
				var slot atomic.Int32
				b.RunParallel(func(pb *testing.PB) {
					w := claim(b, f.ws, &slot)
					i, c, hits := st.start(len(f.keys)), 0, 0
					for pb.Next() {
						if c++; c == mix.writeEvery {
							c = 0
							if err := w.step(f.r, false); err != nil {
								b.Error(err)
								return
							}
							continue
						}
						if _, _, ok := f.r.Lookup(f.keys[i]); ok {
							hits++
						}
						if i++; i == len(f.keys) {
							i = 0
						}
					}
					sink.Add(int64(hits))
				})
			})
		}
	}
}

// BenchmarkRestartStorm restarts consumers over and over at full cap: each
// op kills the owner of one of 10,000 routes, mints a new one and registers
// the same name over the dead entry (a takeover, which needs no free slot),
// then marks it ready. The cost of minting and killing tokens is in every
// implementation's figure alike.
func BenchmarkRestartStorm(b *testing.B) {
	const n = 10_000
	type fixture struct {
		r    Registry
		keys []string
		toks []atomic.Pointer[owner.Token]
	}
	for _, impl := range Registries() {
		run(b, fmt.Sprintf("n=%d/impl=%s", n, impl.Name), func(b *testing.B) (fixture, func()) {
			f := fixture{r: impl.New(n), keys: benchNames(n), toks: make([]atomic.Pointer[owner.Token], n)}
			for i, k := range f.keys {
				t := owner.New()
				f.toks[i].Store(t)
				if err := Preload(f.r, k, i, t.Ref()); err != nil {
					b.Fatal(err)
				}
			}
			return f, func() {
				for i := range f.toks {
					f.toks[i].Load().Release()
				}
			}
		}, func(b *testing.B, f fixture) {
			var st stagger
			var failed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				k := st.start(n)
				for pb.Next() {
					t := owner.New()
					f.toks[k].Swap(t).Release()
					// Two goroutines meet on one name only if one laps the
					// other; then one of them loses, as a real race would.
					if f.r.Register(f.keys[k], k, t.Ref()) != nil || !f.r.MarkReady(f.keys[k], t.Ref()) {
						failed.Add(1)
					}
					if k++; k == n {
						k = 0
					}
				}
			})
			reportFailures(b, &failed, "failed/op")
		})
	}
}

// reportFailures adds a metric only when something failed, so that the
// normal case keeps benchstat's tables narrow.
func reportFailures(b *testing.B, n *atomic.Int64, unit string) {
	if v := n.Load(); v > 0 {
		b.ReportMetric(float64(v)/float64(b.N), unit)
	}
}

// BenchmarkRegisterFullCap registers a new name into a registry at its cap
// whose owners are all alive, so every register is refused: livereg proves
// with the death clock that no sweep can help, the others sweep to find
// out. livereg should be flat across caps.
func BenchmarkRegisterFullCap(b *testing.B) {
	for _, n := range []int{128, 10_000, 100_000} {
		for _, impl := range Registries() {
			run(b, fmt.Sprintf("cap=%d/impl=%s", n, impl.Name), func(b *testing.B) (fullCap, func()) {
				return newFullCap(b, impl, n)
			}, func(b *testing.B, f fullCap) {
				f.refuseLoop(b, 0)
			})
		}
	}
}

// BenchmarkRegisterFullCapUnrelatedDeaths is BenchmarkRegisterFullCap at cap
// 10,000 while owners that hold nothing in this registry die, one per 1,000
// registers. livereg's registry has a death clock of its own that only its
// owners' deaths tick, so these deaths should not make it sweep; compare
// with the cap=10000 case of BenchmarkRegisterFullCap (goal: within 1.2x).
func BenchmarkRegisterFullCapUnrelatedDeaths(b *testing.B) {
	const n, every = 10_000, 1000
	for _, impl := range Registries() {
		run(b, fmt.Sprintf("cap=%d/every=%d/impl=%s", n, every, impl.Name), func(b *testing.B) (fullCap, func()) {
			return newFullCap(b, impl, n)
		}, func(b *testing.B, f fullCap) {
			f.refuseLoop(b, every)
		})
	}
}

// fullCap is a registry filled to its cap with live pool owners, and a live
// newcomer that wants in.
type fullCap struct {
	r        Registry
	newcomer *owner.Token
}

func newFullCap(b *testing.B, impl Impl, n int) (fullCap, func()) {
	r := impl.New(n)
	fill(b, r, n)
	f := fullCap{r: r, newcomer: owner.New()}
	if f.r.Register("mcp.tool.newcomer", 0, f.newcomer.Ref()) == nil {
		b.Fatal("register at full cap succeeded")
	}
	return f, f.newcomer.Release
}

// refuseLoop registers the newcomer over and over; with deathEvery > 0 the
// goroutines also kill unrelated tokens, one per deathEvery registers in
// all, whatever -cpu says.
func (f fullCap) refuseLoop(b *testing.B, deathEvery int) {
	// Each goroutine counts its own registers and kills one token per
	// deathEvery times the goroutines' number: the same rate in all as one
	// shared count, without a counter that every register of every
	// goroutine would write, which costs more than the register itself.
	every := deathEvery * runtime.GOMAXPROCS(0)
	b.RunParallel(func(pb *testing.PB) {
		registers := 0
		for pb.Next() {
			if registers++; deathEvery > 0 && registers%every == 0 {
				owner.New().Release()
			}
			if f.r.Register("mcp.tool.newcomer", 0, f.newcomer.Ref()) == nil {
				b.Error("register at full cap succeeded")
				return
			}
		}
	})
}

// BenchmarkRegisterFullCapDead registers at full cap when 1% of the entries
// are dead: 100 consumers of 100 routes each fill cap 10,000; a goroutine
// takes one consumer, kills it (1% of the entries die) and registers 100
// new routes for its successor. The first of those registers finds the
// registry full and must prune; the other 99 find the slots it freed
// (except in the reference design, which sweeps on every register). ns/op is
// per register, the prune amortized over the 100.
func BenchmarkRegisterFullCapDead(b *testing.B) {
	const n, per = 10_000, 100
	type fixture struct {
		r    Registry
		free chan *group
		all  []*group
	}
	for _, impl := range Registries() {
		run(b, fmt.Sprintf("cap=%d/dead=1pct/impl=%s", n, impl.Name), func(b *testing.B) (fixture, func()) {
			f := fixture{r: impl.New(n), free: make(chan *group, n/per)}
			for g := range n / per {
				gr := &group{tok: owner.New(), pos: per}
				for set := range gr.names {
					gr.names[set] = make([]string, per)
					for i := range per {
						gr.names[set][i] = toolName(set*n + g*per + i)
					}
				}
				for _, name := range gr.names[0] {
					if err := Preload(f.r, name, g, gr.tok.Ref()); err != nil {
						b.Fatal(err)
					}
				}
				f.all = append(f.all, gr)
				f.free <- gr
			}
			return f, func() {
				for _, gr := range f.all {
					gr.tok.Release()
				}
			}
		}, func(b *testing.B, f fixture) {
			var refused atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				var cur *group
				for pb.Next() {
					if cur == nil {
						cur = <-f.free
						if cur.pos == per {
							cur.restart()
						}
					}
					if f.r.Register(cur.names[cur.set][cur.pos], 0, cur.tok.Ref()) != nil {
						refused.Add(1)
					}
					if cur.pos++; cur.pos == per {
						f.free <- cur
						cur = nil
					}
				}
				if cur != nil {
					f.free <- cur
				}
			})
			reportFailures(b, &refused, "refused/op")
		})
	}
}

// group is one consumer holding 1% of the cap. Its names rotate through
// three sets, so that a successor registers names its predecessors do not
// hold.
type group struct {
	tok   *owner.Token
	names [3][]string
	set   int
	pos   int // next name to register; len(names[set]) once all are in
}

func (g *group) restart() {
	g.tok.Release()
	g.tok = owner.New()
	g.set = (g.set + 1) % len(g.names)
	g.pos = 0
}
