// Package owner provides owner-liveness tokens: the strong handle a consumer
// holds while it runs, and the weak views that registries keep beside each
// entry the consumer registered.
//
// # Model
//
// Each consumer start mints a [Token] and keeps it for as long as it serves.
// Everything the consumer registers elsewhere carries a [Ref], a weak view of
// that token. A Ref never keeps its Token reachable and never revives it: it
// can only answer whether the token is still alive ([Ref.Alive]), whether two
// views came from the same token ([Ref.Same]), and when the token died
// ([Ref.Done]). A registry that meets an entry whose Ref reads dead knows the
// entry is stale and may reclaim it, without asking anybody.
//
// A token dies exactly once, by whichever of these paths comes first:
//
//   - explicit release: [Token.Release], the consumer's stop or its failure
//     cleanup;
//   - cancellation: a token minted by [NewContext] dies when its context is
//     done, which is how a supervisor aborts a consumer;
//   - unwinding: [Run] releases the token when its function returns or
//     panics, and lets the panic go on;
//   - being dropped: when a Token becomes unreachable, the garbage collector
//     runs a cleanup that kills it. This is a safety net, not a schedule: the
//     Refs read dead only after the next garbage collection that finds the
//     Token unreachable, and the cleanup has run.
//
// There are no timers, leases or heartbeats. Liveness is a property of the
// token alone, so a restart that follows a crash by a microsecond sees the
// old owner dead as soon as its death has happened, with no TTL to wait out.
//
// A goroutine that is stuck forever keeps its token alive, because Go has no
// way to abort it: deferring Release does not help a goroutine that never
// returns. Mint the token from a context with [NewContext] and cancel that
// context to kill a stuck consumer's token.
//
// # The death clock
//
// [Deaths] reports how many tokens have died in the process so far and
// whether a death is in progress right now. A registry that swept away every
// dead-owner entry can later tell, in one atomic load, that no owner can have
// died since, and skip the next sweep. See [Deaths] for the rule that makes
// this sound.
//
// Deaths counts every death in the process, so a registry that trusts it
// sweeps again whenever any owner anywhere dies. A [DeathClock] counts only
// the deaths of the tokens tracked on it ([Ref.Track]), by the same rule: a
// registry tracks the owner of each entry before the entry can be seen, and
// its clock then moves only when one of its own owners dies. A token keeps
// its first clock in its own cell, so tracking costs a registry's register
// no lock and no allocation.
//
// # Holds
//
// A death moves a token from alive through dying to dead; Alive reads a
// dying token as alive, so the death becomes visible only after the clock
// counts it as in progress. A registry that publishes an entry of an owner
// takes a hold on it ([Ref.Enter], [Ref.Exit]) for the few instructions
// between its liveness check and the entry becoming visible: a death that
// begins then waits for the hold before it completes, so "the owner was
// alive" and "the entry is visible" are one atomic step. An Exit with no
// hold to release panics and changes nothing, rather than leave a count
// below zero that every later death of the token would wait on forever,
// holding the process-wide death clock unsettled. Every Release,
// the losing one of a race included, returns only once the token reads
// dead.
//
// A dispatcher needs the same for every call it admits, on a path where a
// shared counter would cost too much: [Ref.Hold] attaches a [Holder] whose
// count the dispatcher keeps itself (striped across cache lines), and a
// death that begins waits until the holder reports nothing held. The holder
// announces an admission before it reads the owner's liveness; the death
// flips the cell to dying before it asks the holder; so one of the two
// always sees the other.
//
// # After the death
//
// [Ref.AfterDeath] runs a function once the token is dead, on a goroutine of
// its own, whichever path killed it, the way [context.AfterFunc] does for a
// context. A registry reclaims a dead owner's entries that way without a
// goroutine of its own waiting on [Ref.Done]: an idle consumer costs no
// goroutine at all.
//
// # Representation
//
// A Token points to a small liveness cell (state, id, done channel); every Ref
// points to the same cell. Holding a strong pointer to the cell, rather than
// a weak.Pointer to the Token, keeps [Ref.Alive] at one atomic load, and the
// cell gives an identity that cannot be reused while any Ref still points to
// it (no ABA). The cleanup attached to the Token captures only the cell, so
// it does not keep the Token reachable.
package owner
