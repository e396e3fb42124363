// Package shardreg is a concurrent registry of named entries whose owners
// can die without saying so: the catalog of tools (keyed by name) or
// resources (keyed by URI) that an MCP server resolves on every request.
//
// # Model
//
// Every entry carries an [owner.Ref], the weak view of the token its
// consumer minted on start. An entry whose owner has died, by whatever path,
// is dead: it is never returned, never listed, and it yields to anybody who
// wants its name or its slot. The rules, from ADR-0068:
//
//   - [Registry.Register] rejects a name held by a live owner with
//     [ErrDuplicate], and replaces, in place and atomically, an entry whose
//     owner is dead. A takeover takes no second slot.
//   - Before it refuses a register with [ErrCapReached], Register sweeps away
//     every dead-owner entry under any name, so a dead entry releases its
//     slot. The sweep visits at most the cap's worth of entries, and it is
//     skipped, in one atomic load, when [owner.Deaths] proves no owner can
//     have died since the last one.
//   - [Registry.Resolve] and [Registry.ListReady] skip dead-owner entries and
//     remove them (Resolve only when no listing holds writes off: it never
//     waits).
//   - [Registry.UnregisterOwned] removes an entry only when the caller's Ref
//     is [owner.Ref.Same] as the entry's, so a late stop of a dead owner
//     never deletes the entry of the successor that replaced it.
//
// Reclaiming a dead-owner entry is a step of its own. It may happen at any
// moment after the owner's death, inside whichever operation meets the
// entry (a Resolve, a listing, a register's sweep, Prune) or from a caller
// such as package catalog, which reclaims a route as soon as its owner
// dies. Until then the entry still counts in [Registry.Len] and its owner's
// UnregisterOwned still removes it; after it, neither.
//
// A new entry starts not ready: it holds its name and its slot, but is not
// resolved or listed until its owner calls [Registry.MarkReady].
//
// # Concurrency
//
// All methods are safe for concurrent use and linearizable: each appears to
// take effect at one instant between its call and its return, owner deaths
// and reclaims included (an operation that reclaims dead entries may do so
// at instants of their own before its result's). Resolve takes no lock and
// does not allocate: one lock-free hash lookup in an xsync.MapOf and two
// atomic loads. Writes go through the map's per-bucket locks, one Compute
// each, so the value stored for a name only ever changes atomically.
//
// A register checks its owner alive under the bucket lock, and the new
// entry becomes visible only when the Compute returns. An owner that died
// in between would leave readers seeing the replaced entry after the
// death, and an entry that no sweep is bound to revisit. So the register
// holds its owner over that window ([owner.Ref.Enter]): a death that begins
// then waits the few instructions until the entry is visible. Holds are
// never taken while anything else is waited for.
//
// Listing needs a consistent view of the whole map, which a concurrent hash
// map does not give. Every write therefore runs inside a write section that
// is counted on one atomic word, as the owner package counts deaths: in
// progress, then completed. A listing reads that word settled, scans, and
// keeps the scan only when the word has not moved; otherwise it scans
// again, and after a few disturbed scans it briefly holds new writes off,
// so writes delay a listing by a bounded number of scans.
//
// Owner deaths are not writes: nothing can hold them off, and they come
// from the whole process, so they must not undo a listing, and whether one
// holds never depends on the process-wide death clock. Its scan keeps
// the ready entries whose owners read alive; then, with the write count
// still unmoved, it reads those owners again, pass after pass, until a pass
// finds no owner newly dead. The listing is that of the instant just before the
// clean pass began. At that instant the map held exactly what the scan saw
// (no write completed or was in progress between the scan's start and
// then), every owner found dead earlier was dead (deaths are permanent),
// and every owner found alive in the clean pass was alive (it was alive
// later still). So a listing is linearizable at that instant, whatever
// dies elsewhere and whenever. A pass that is not clean found an owner that
// died during it or the one before; that happens at most twice per
// distinct owner of a listed entry, so even when every owner in the
// registry is dying a listing ends after at most twice that many passes,
// plus one. Reclaiming the dead entries it passed over comes after the
// listing's instant, each reclaim a step of its own.
//
// The result is cached. A cached listing is still the registry's listing
// while the write count has not moved and its listed owners are alive
// (the entries it left out were not ready, which only a write changes, or
// dead, which lasts). Its owners' liveness comes from the death clock in
// O(1) while no owner anywhere has died since the listing last saw them
// alive, and otherwise from one pass over the listed owners. Listers that
// find the cache stale share one rebuild. The first change drops the
// cache, so it never keeps a removed entry's value reachable.
//
// Lookups never wait. When one meets a dead entry while a listing holds
// writes off, it misses without reclaiming it: a miss is right at any
// instant at which the name still maps to that entry, which it checks with
// a second load.
//
// The registry starts no goroutines and uses no timers: liveness comes from
// the owners' tokens alone.
package shardreg
