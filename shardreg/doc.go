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
//     skipped, in a load per stripe of the registry's own death clock, when
//     that clock proves that none of its owners can have died since the
//     last one; deaths elsewhere in the process never make it sweep.
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
// # The registry's death clock
//
// Each registry keeps an [owner.DeathClock] that only the deaths of its own
// owners tick, so that owners dying elsewhere in the process cost it
// nothing. A register tracks its owner on that clock ([owner.Ref.Track])
// before its entry can be seen, and reports ErrDeadOwner when the owner
// refuses, which it does once it is dying; the register's hold then keeps
// the owner alive until the entry is visible. A token is tracked once per
// registry, however many entries it holds there, so a register whose owner
// is tracked already pays two loads for it.
//
// A register at full cap is refused without a sweep when that clock read
// (c, settled) when the last full sweep began, before its scan, and reads
// (c, settled) again now, inside a read of the map that no write
// overlapped. Let T be the instant this second reading begins: the map then
// holds what the register read. Then every entry in the map at T has a live
// owner. Take any entry e there and its owner o, and suppose o dead at T.
// o was tracked before e became visible, so o's death ticks the clock: in
// progress before o reads dead, completed after. By the clock's rule
// ([owner.DeathClock.Read]), o was already dead when the sweep's reading
// ended, since it was dying by T; so o was dead before the sweep scanned.
// And e was visible before that death was even counted in progress: the
// register's hold admits no dying owner, and a death waits for the holds
// before it ticks. So e was in the map for the whole scan, which therefore
// met it, found o dead, and removed it. An entry once removed never
// returns, which contradicts e being in the map at T. So the registry was
// full of live owners at T, and ErrCapReached is its answer. This is
// [owner.Deaths]'s argument with "every token" narrowed to "every owner
// that holds an entry here": the clock of a registry is only ever asked
// about its own entries' owners.
//
// A token that no longer holds anything in the registry stays tracked and
// still ticks the clock when it dies: one sweep too many, never one too few.
// Listings use the same clock to keep serving a cached listing in O(1),
// by the same argument over the listed owners.
//
// # Listings
//
// Listing needs a consistent view of the whole map, which a concurrent hash
// map does not give. Every write therefore runs inside a write section that
// is counted, as the owner package counts deaths, in progress and then
// completed, on one stripe of a striped counter: writers on different cores
// write different cache lines, so writes scale with cores. A listing reads
// every stripe settled, scans, and keeps the scan only when, stripe by
// stripe, the counter has not moved (the completed counts only grow, so an
// unchanged sum with every stripe settled is an unchanged counter);
// otherwise it scans again, and after a few disturbed scans it briefly
// holds new writes off, so writes delay a listing by a bounded number of
// scans. The cap counter stays one word, reserved by compare-and-swap
// inside the write section: it never passes the cap, not even for an
// instant.
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
// dead, which lasts). Its owners' liveness comes from the registry's death
// clock in O(1) while none of the registry's owners has died since the
// listing last saw them alive, and otherwise from one pass over the listed
// owners. Listers that
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
