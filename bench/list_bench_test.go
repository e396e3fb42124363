package bench

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkListReady lists 1,000 ready entries from every goroutine.
// state=cached: nothing changes between listings (livereg serves its cached
// snapshot). state=changed: every op first registers or unregisters one
// ready entry of the goroutine's own, then lists, so every listing is fresh;
// the write is part of the op for every implementation.
func BenchmarkListReady(b *testing.B) {
	const n = 1000
	type fixture struct {
		r  Registry
		ws []*writer
	}
	for _, state := range []string{"cached", "changed"} {
		for _, impl := range Registries() {
			run(b, fmt.Sprintf("n=%d/state=%s/impl=%s", n, state, impl.Name), func(b *testing.B) (fixture, func()) {
				r := impl.New(n + maxWriters)
				fill(b, r, n)
				if got := len(r.ListReady()); got != n {
					b.Fatalf("listed %d entries, want %d", got, n)
				}
				ws := newWriters(3_000_000)
				return fixture{r, ws}, func() { releaseWriters(ws) }
			}, func(b *testing.B, f fixture) {
				var slot atomic.Int32
				b.RunParallel(func(pb *testing.PB) {
					w := claim(b, f.ws, &slot)
					listed := 0
					for pb.Next() {
						if state == "changed" {
							if err := w.step(f.r, true); err != nil {
								b.Error(err)
								return
							}
						}
						listed += len(f.r.ListReady())
					}
					sink.Add(int64(listed))
				})
			})
		}
	}
}

// BenchmarkPageWalk walks all 10,000 ready entries in pages of 100, as a
// client paging through tools/list does; one op is the whole walk. The
// baselines page the way list-then-paginate SDKs do: each page is cut from
// a fresh listing.
func BenchmarkPageWalk(b *testing.B) {
	const n, limit = 10_000, 100
	for _, impl := range Registries() {
		run(b, fmt.Sprintf("n=%d/limit=%d/impl=%s", n, limit, impl.Name), func(b *testing.B) (Registry, func()) {
			r := impl.New(n)
			fill(b, r, n)
			if got := walk(b, r, limit); got != n {
				b.Fatalf("walk returned %d entries, want %d", got, n)
			}
			return r, nil
		}, func(b *testing.B, r Registry) {
			b.RunParallel(func(pb *testing.PB) {
				seen := 0
				for pb.Next() {
					seen += walk(b, r, limit)
				}
				sink.Add(int64(seen))
			})
		})
	}
}

func walk(b *testing.B, r Registry, limit int) int {
	seen, cursor := 0, ""
	for {
		page, next, err := r.Page(cursor, limit)
		if err != nil {
			b.Error(err)
			return seen
		}
		seen += len(page)
		if next == "" {
			return seen
		}
		cursor = next
	}
}
