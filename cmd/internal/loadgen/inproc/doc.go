// Package inproc is cmd/loadgen's in-process world: it hammers a catalog with
// parallel calls, prompt gets, templated and fixed reads, listings,
// resource updates, starts and stops of tools, prompts, resource templates
// and fixed resources while consumers die in every
// way ADR-0068 names, checks the ADR's invariants while it runs, and
// reports what it saw.
//
// # Workload
//
// Resolver goroutines call tools (resolve, guard, admission, the body on
// the caller's goroutine) and list them.
// Consumer goroutines start a consumer on a name drawn from a small set, so
// that names collide and the cap is hit, keep it a random while, and end it
// by one of four shapes: a clean Stop, a cancel of the context it was
// started with (task abort), a panic in its route body (triggered by a
// special argument; the catalog recovers and kills the consumer), or a drop
// of the *catalog.Consumer without Stop, which ends the owner only through
// the garbage collector. A dedicated goroutine calls runtime.GC every few
// milliseconds while a dropped consumer is waiting to be collected, so that
// runs stay short; the token still dies only through the GC path. After a
// cancel or a panic, a consumer goroutine sometimes restarts the same name
// at once and then calls the dead consumer's Stop late, to exercise the
// owner-conditional unregister.
//
// Consumers serve four kinds of route, drawn by the mix's tool, prompt,
// template and resource weights, each kind under its own cap (Config.Cap
// for tools, a quarter of it for each other kind). Resolvers get prompts
// as they call tools. Templates come in groups of two overlapping keys, a
// wide "lg://gN/{+path}" and a specific "lg://gN/item/{id}", and each key
// has two variants that differ only in the variable's name, which a start
// picks between: live variants collide as duplicates. Resolvers read
// item URIs, which both keys match and the specific one must win while it
// lives, and URIs only the wide key matches; a read carries its begin
// number and credential in the URI's last segment, as a call does in its
// arguments. Every kind dies by the same four shapes, is listed, and is
// restarted and stopped late.
//
// Fixed resources are the fourth kind, drawn by the mix's resource weight
// under a cap of their own (a quarter of Config.Cap), on half as many URIs
// as tool names, "lg://res-N", which no loadgen template matches.
// Resolvers read them (the read weight is split between templated and
// fixed reads by the template and resource weights); an in-process read
// carries its begin number and credential in the context, which the
// catalog hands to the reader, since a fixed URI has no room for them. A
// resource consumer publishes an update (Consumer.Updated) after its
// start and after its hold, and once more after its death was observed,
// and a crashed one again just before its late Stop, while its successor
// holds the URI. A listener registered with OnResourceUpdated counts the
// updates of each URI; the loadgen's Updated calls on one URI run one at a
// time, and the catalog calls listeners on the publisher's goroutine
// before Updated returns, so the count's change across a call is what
// that call delivered.
//
// With -mcp, the same calls, prompt gets, templated reads and tool
// listings also go through the official MCP SDK client over streamable
// HTTP, to an in-process mcpserve server on a loopback port that serves
// the run's catalog; the route bodies check those operations exactly as
// they check in-process ones, and the report gives protocol latency
// (mcp_call, mcp_get, mcp_read, mcp_list) beside in-process latency. With
// -target, the client drives a running server instead; its consumers are
// not the loadgen's, so its answers are measured, not checked, and the
// invariants are checked on the in-process catalog that runs beside it.
// -protocol 2026-07-28 has the clients speak the MCP revision without
// sessions: the in-process server runs stateless, each client discovers
// it with server/discover and hears list_changed over
// subscriptions/listen, and invariant 10 holds on that path. A run whose
// clients were given another revision (a -target that is not stateless)
// fails at the start rather than pass on the wrong protocol.
//
// # One clock for "before"
//
// Several invariants are about order: "a call that began after the owner
// was observed dead". Order is taken from one process-wide atomic counter.
// Whoever observes an owner's Done channel closed records a number from it
// as that owner's death mark; every call, listing and start takes a number
// from it when it begins. A death mark smaller than an operation's begin
// number proves the owner's death happened before the operation began,
// because the Done channel closes only after the token reads dead. The
// converse is not claimed: an owner may die in the nanoseconds between the
// catalog's check and the body's first line, which ADR-0068 allows, so a
// death observed after an operation began is never a violation. This keeps
// every check sound: a reported violation is a real one, and the checks do
// not flake.
//
// # Invariants
//
// Each invariant has its own checker, fed by events from the workload or
// by probing the system through the [System] interface, so that tests can
// feed each one a deliberately broken system and watch it fire:
//
//  1. body_after_death: a route body (tool handler, prompt handler,
//     template reader) started for a call, get or read that began after
//     its owner was observed dead. The body knows its owner; the begin
//     number travels in the call's JSON arguments, the prompt's arguments
//     or the read's URI.
//  2. late_stop_removed_successor: after a dead consumer's late Stop, the
//     live successor on its name no longer resolves, is no longer listed,
//     or its plan is no longer enforced (a call without credentials is not
//     denied, or a valid call does not reach the successor's body).
//  3. unauthenticated_body: a route body of any kind with a plan that needs a role ran
//     for a call made without valid credentials, or saw a principal that
//     lacks the role.
//  4. cap_counter, per kind: the catalog's slot count of the kind exceeded
//     its cap; a start was refused with ErrCapReached although fewer than
//     cap consumers of the kind could possibly have held an entry (dead
//     entries must release their slots); or, when quiet at the end, the
//     kind's slot count or listing differed from its live consumers.
//  5. dead_entry_returned: a listing of any kind that began after an
//     owner was observed dead contained its route, or a call or prompt get
//     resolved an entry of an owner observed dead (ErrRouteGone where the
//     only possible entry was dead before the call began). A templated read
//     during which no start on its group's keys overlapped it: succeeded or
//     got ErrRouteGone although every template that matches its URI was
//     observed dead before it began; or, while the wide template lived
//     throughout and the specific one was observed dead before the read
//     began, got ErrRouteGone or unknown, or the dead one's answer.
//  6. duplicate_with_dead_incumbent: a start (of a template: of either
//     variant of its key) was refused with ErrDuplicate
//     although the name's incumbent had been observed dead before the start
//     began and no other start on the name overlapped it.
//  7. resource_growth: goroutines or live heap kept growing across the run
//     beyond a tolerance (see [GrowthTolerance]), did not return to their
//     baseline after every consumer ended, or a dropped consumer was never
//     collected.
//  8. body_after_stop: a route body started after its consumer's Stop had
//     returned nil, whenever its call began. Stop closes the route, then
//     waits for the bodies already admitted, so this is exact: no body of a
//     stopped consumer can see its Stop returned.
//  9. one_winner: a successful call or get, made while one consumer held
//     the name and lived and no start on the name overlapped the call, ran
//     another consumer's body (the body answers with its owner's tag); or a
//     start succeeded while another consumer whose start on the name (a
//     template's key, whichever variant) had succeeded still lived.
//  10. list_changed: in every run, in process: a start, Stop or death
//     that moved the catalog's version was not announced: a follower of
//     Catalog.Changes, which takes the channel, then reads Version, then
//     waits, had not read the version taken once the change was complete
//     (after the start or Stop returned; for a death, after a listing of
//     its kind, which reclaims a dead entry it passes over) within 2 s.
//     Under load another change soon wakes a follower that missed one, so
//     at the end of the run, with nothing else changing, a start, its
//     death by a cancel, a second start and its Stop are each the only
//     change. With -mcp and the in-process server, also over MCP: the end
//     of a started consumer, by any death or a Stop, was not followed within
//     the server's coalescing window plus a generous margin (3 s) by a
//     tools/list_changed on every client session that was already
//     receiving notifications when the end began (on its standalone
//     stream, or with -protocol 2026-07-28 its subscriptions/listen
//     stream); or, in the probe at the end of the run, the listing after
//     that notification still showed the route. During the run any later notification satisfies the
//     check, since other changes keep the server notifying; so at the end,
//     with nothing else changing, the probe starts a consumer, lets the
//     window run out, and ends it by a cancel and then by a Stop, each
//     the only change, so that a server that forgets one kind of end is
//     caught every run. Listings after an observed death are invariant 5's
//     throughout. Only tool ends are judged: prompts, templates and
//     resources have notifications of their own.
//  11. template_match: a templated item read during which no start on its
//     group's keys overlapped it, made while the specific template's owner
//     lived throughout (its owner alive and its Stop not begun when the
//     read ended), was answered by another body; or, made while only the
//     wide template lived throughout, by another body than the wide one's.
//     Also: a template reader got variables other than its own template's
//     one variable holding the URI's text after the template's prefix.
//  12. resource_update: an Updated call that began after its consumer was
//     observed dead returned anything but ErrDeadOwner or reached a
//     listener; or one whose consumer still lived, its Stop not begun,
//     when the call returned (so throughout it) did not succeed or did not
//     reach the listener exactly once; or the listener heard an update
//     while no loadgen Updated call on its URI was in flight, or of a URI
//     no loadgen consumer serves. A call during which its consumer died is
//     not judged. Invariants 1 to 6, 8 and 9 cover fixed resources as they
//     cover the other kinds, 1, 3 and 8 for in-process reads only.
//  13. stop_drain: a Stop returned nil while a body of its consumer still
//     ran (each body counts itself from its first line to its last), or
//     had not returned 5 s after it began, its drain never woken. Bodies
//     take microseconds, so a Stop of every eighth consumer first has one
//     of its bodies held inside, let go 0.5 ms after the Stop began; the
//     Stop of another eighth runs while another goroutine keeps calling
//     the route, so that a body ends as the drain closes the gate, last.
//  14. after_death_order: a function given to owner.Ref.AfterDeath ran
//     while its token still read alive. Every started consumer's owner
//     gets one; and a cancel of every eighth consumer holds its death
//     open with an owner.Holder of the loadgen's own, once the death has
//     sealed the token's attachments, gives the dying owner (which still
//     reads alive) a function, and fails if it runs before the holder
//     lets the death complete.
//  15. listing_instant: a listing of any kind showed two routes that no
//     instant had together: one whose owner was observed dead before the
//     other's start began. A listing that let a write slip into its scan,
//     or a cache patched together from two, shows such a state.
//  16. listed_dead_owner: a listing of any kind that began after the
//     current holder of a name read dead (its owner's liveness read just
//     before the listing, or its death observed) listed its route. Unlike
//     invariant 5 it judges listings in the moment after the owner reads
//     dead and before the death is counted complete on the registry's
//     death clock: every cancel but the dying probe's parks goroutines
//     on the owner's Done, which makes the death's close of Done take
//     microseconds, and lists its kind from a goroutine that spins on the
//     owner's liveness, listing all along so that the listing stays
//     cached up to the death.
//  17. round_reached_other: a sixteenth of the in-process calls, and with
//     -mcp a quarter of the MCP clients' calls, ask the body to ask the
//     caller first (an elicitation whose message is the asking consumer's
//     tag, which the caller echoes in its answer). The in-process caller
//     answers in rounds (catalog.Round), as a client of 2026-07-28 does:
//     the second round must run in the consumer that asked or fail as
//     gone. The check fails when a body receives an answer to another
//     consumer's question. Consumers die and restart under the rounds all
//     along, so a retry that reached a successor would be caught. A
//     2025-11-25 session answers mid-call, where it holds trivially.
//  18. task_outlived_consumer: another sixteenth of the in-process calls
//     run as tasks (catalog.StartTask), whose body notes its consumer and
//     then holds a moment, heedless of the consumer's death, as many
//     bodies are; the caller reads the task (GetTask) until it ends. The
//     check fails when a read that began after the task's consumer was
//     observed dead found the task still working: a task lives exactly as
//     long as its consumer, by any of the four deaths.
//  19. task_store_bounds: the catalog keeps tasks 500 ms after they end,
//     and the run starts more than its task caps allow (TaskCap in all,
//     TaskCapPerCaller for one credential, TaskResultBytes of results), so
//     that starts are refused at the caps all along, as overloaded (most
//     tasks come from the valid credential, so its cap binds first). Every
//     sample of the catalog's Stats (the cap prober's) must find the store
//     within all three.
//  20. denied_heard: beside the load, on a catalog and an in-memory
//     mcpserve server of its own (deniedcheck.go), so that its routes
//     count against none of the run's caps and reach none of its
//     listeners, a principal without the role subscribes to a resource
//     that needs it (resources/subscribe at 2025-11-25,
//     subscriptions/listen at 2026-07-28), reads it, starts tasks of a
//     tool that needs it and reads the valid credential's tasks, while
//     the resource publishes updates and its consumer restarts; a
//     principal that holds the role until 300 ms after the start follows
//     a resource updated only after that. The check fails for any update
//     either hears, a subscribe or read admitted, or a task result read.
//
// What the catalog promises about deaths other than Stop is stronger than
// invariant 1: a body is admitted only while its owner lives, whenever its
// call began, even one that waited for a slot. Its linearization point is
// the admission, which happens inside the catalog; a body cannot observe it
// (its owner may die in the instructions between the admission and the
// body's first line), so no sound loadgen check exists for it. The
// catalog's deterministic tests pin it instead (catalog/admission_test.go).
//
// Every check also counts how often it could have fired; a report shows
// both numbers, because a checker that never checks proves nothing.
// Errors that no invariant names but that a correct catalog never produces
// (a Stop that times out, a start refused for another reason than a
// duplicate or the cap, a consumer that dies with nobody ending it) are
// counted and listed too, and fail the run like violations.
//
// What this world shares with cmd/loadgen's -fleet world (package fleet)
// lives in subpackages of cmd/internal/loadgen, each used by both: the
// tally of checks and violations (invariant), latency histograms and
// their percentiles (latency), the verdict, exit codes and JSON of a
// report (report), bounded waits and periodic loops (wait), the command
// line and its common flags (cli), the load phase's start, end and
// wind-down (runner), and the MCP clients' credential (bearer).
package inproc
