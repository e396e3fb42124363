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
//     remove them.
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
// progress, then completed. A listing scans optimistically and keeps the
// result only when no write and no owner death overlapped the scan;
// otherwise it retries, and after a few failed tries it briefly holds new
// writes off. The scan's result is cached: until the next write or death,
// ListReady returns the same sorted slice without copying it.
//
// The registry starts no goroutines and uses no timers: liveness comes from
// the owners' tokens alone.
package shardreg
