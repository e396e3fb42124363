// Package fleet is cmd/loadgen's -fleet world: it runs N replicas of a
// livereg fleet in one process, over an embedded single-node etcd in a
// temporary directory (or a real cluster, -etcd), drives calls and
// listings through random replicas while consumers collide across
// replicas and die, crashes replicas and makes them lose their sessions,
// checks the fleet's invariants as it runs, and reports what it saw. It
// imports etcd, as only the cmd module may; package inproc, beside it, is
// the in-process world.
//
// # The fleet
//
// Each replica has its own etcdfleet.Replica (lease TTL -fleet-ttl, 1 s by
// default), whose etcd client reaches etcd through a loopback TCP proxy of
// its own; its own catalog, with the Replica as Claimer and Remote; its
// own mcpserve server with Fleet set (one fleet token for all), on a
// loopback listener, the fleet endpoint advertised in its claims; and its
// own SDK clients, one that presents the valid credential and one that
// presents none.
//
// # Workload
//
// Consumer goroutines start tool consumers on random replicas, on names
// drawn from a small shared pool, so that starts collide across replicas
// (etcd refuses all but one), hold them a random while (one hold in ten
// outlasts the TTL a few times over) and end them by inproc's
// four shapes: Stop, a cancel of the start context, a panic in the body (a
// call that asks for one), or a drop of the *catalog.Consumer without
// Stop, which ends it only through the garbage collector. Half the
// consumers that died by a cancel or a panic have their name restarted on
// a random replica at once, and then their late Stop called. Resolver
// goroutines call tools/call and tools/list through random replicas'
// clients; a call for a route another replica holds is forwarded there.
// Every call carries the loadgen's clock reading, its credential and the
// replica it was sent to, so that the body can judge it. Tasker
// goroutines (-taskers) call tools as clients of 2026-07-28 that take
// tasks, through a random replica: the body notes its consumer, then
// detaches, and the rest answers with its consumer's tag and the task's
// nonce 2 ms later (one task in four, 300 ms later). The tasker reads the
// task through replicas other than its holder until it ends.
//
// Surface consumer goroutines (-surface) start prompt, resource template
// and fixed resource consumers on random replicas, on three names of
// each kind shared by the fleet, and end them by the same four shapes. A
// fixed resource publishes an update (Consumer.Updated) every 5 ms while
// held, and once more after its death was observed (not a dropped one,
// whose handle is gone). Resolvers also get prompts (prompts/get) and read
// templated URIs (resources/read) through random replicas, forwarded when
// another replica holds them: the arguments or the URI carry the clock
// reading, the credential and the replica called, and the body answers
// with its consumer's tag, as a tool's does; and one call in twelve asks
// for progress, which the body reports, 1, 2 and 3 of 3, before it
// answers. Subscriber goroutines (-subscribers) open a session on a
// replica other than the one that holds a fixed resource of the pool,
// subscribe to it there, and listen for 100 to 500 ms.
//
// A chaos goroutine makes one failure at a time, on a random replica,
// -chaos-every after the last one ended, in turn:
//   - a revoked lease: the replica's lease is revoked from the run's own
//     etcd client, so that its keys go at once and its next keepalive
//     fails;
//   - a crash: the replica's proxy is cut (its keepalives stop and its
//     lease expires on the server a TTL later), every connection of its
//     MCP server is closed at once and the server stops, and it is
//     abandoned, never Closed; a fresh replica takes its slot;
//   - a cut: the replica's proxy is cut for a TTL and 300 ms, then healed.
//
// After the last two the replica must kill its consumers (their workers
// see them die) and open a new session, within the TTL and 10 s.
//
// A forger (on by default; -forge=false turns it off) writes records that
// no replica wrote into the fleet's tool directory, one every 100 ms, with
// the run's own etcd client, as anyone who can reach etcd could. It works
// on raw JSON maps copied from a genuine record, so that it forges
// whatever the record format is, a top-level "sig" included. Each cycle
// starts a decoy consumer on a random replica and copies its record into:
// a made-up name with the "sig" removed; one with a wrong "sig"; one whose
// descriptor is invalid ("inputSchema": 5), "sig" kept; the decoy's
// genuine value, unchanged, under a made-up name's key; and, over the
// decoy's own key (its lease kept), its record with the "endpoint"
// changed, "sig" kept, then with its "tool" descriptor changed. Made-up
// names begin with "forged-", altered descriptors carry "FORGED" in their
// title, and every forged endpoint is a trap: a loopback HTTP server that
// counts every request and notes which credentials came with it (it
// answers as an MCP server with no tools, so that a replica following a
// forged record goes on to the call). After each write the forger waits
// until every replica's view has applied it, then looks for it (invariant
// 8) and calls its name through a replica that does not hold it. The
// decoy stops at the end of its cycle, and the made-up keys hang on a
// lease of the forger's, revoked when it stops, with the failures, before
// churn stops.
//
// At the end churn stops (no failure, call, start or end), invariant 4 is
// measured, a quiet phase measures one call at a time through the holder
// and through each other replica, and every consumer is stopped.
//
// # Invariants
//
// The checks use one argument throughout: a consumer whose start succeeded,
// whose owner lives (its Done is open) and whose Stop has not begun has
// not released its claim, since the catalog releases only from Stop or
// after the death; and a lease that still exists has not taken its keys
// with it, since an expired or revoked lease never comes back. So while
// both live, the consumer's key must be in etcd and be its own. When a
// suspect case's lease turns out gone (etcd's TimeToLive, asked after the
// fact), the case is the window a lost session leaves by design (etcdfleet's
// "Crashes and partitions": etcd expires the lease before the replica
// kills its consumers): it is counted as inconclusive, never as a
// violation. Every reported violation is a real one.
//
//  1. two_live_claims: when a start succeeds, another consumer whose start
//     on the name succeeded still lives with its lease; or, in a Get of the
//     claim prefix every 50 ms (one revision), the key of a consumer that
//     lived with its lease before and after the Get is another's or
//     missing; or a key holds no claim, is not its name's key, or a name is
//     claimed under two keys. A crashed replica's consumers are not judged.
//  2. late_release_removed_successor: a watch of the prefix sees a key
//     deleted whose owner still lives, has not begun to stop, and whose
//     lease lives: only a release of an earlier claim, not fenced on the
//     key's create revision, removes such a key.
//  3. forward_body_after_death: a route body ran for a call forwarded from
//     another replica that began after its owner was observed dead (as
//     inproc's body_after_death, across the hop); and
//     forward_answer: a call through a replica that located the route on
//     another one, whose consumer lived throughout the call (its Stop not
//     begun, both replicas up), was not answered by that consumer's body
//     nor denied by its plan (unknown, route_gone, peer_unavailable,
//     another body's answer, a denial the plan does not call for). Its
//     lease gone, or an answer from the called replica's own consumer of
//     the name whose lease is gone, makes the case inconclusive; so does
//     an unknown through a view that located the name, before the call,
//     by another record than that consumer's (a predecessor's on the same
//     replica, which a lagging view then drops before it applies the
//     successor's claim).
//  4. listing_convergence: once churn stops, every replica's tool, prompt
//     and template listing (one list of the three) is the same within
//     100 ms, and then, within the TTL and 2 s (a crashed replica's claims
//     expire), the live consumers' routes.
//  5. crashed_names_freed: before each crash a probe consumer starts on the
//     replica, on a name of its own; from the crash on, another replica
//     starts the name every 2 ms until it succeeds, which must happen
//     within TTL + 0.5 s. The lease expires at most a TTL after the
//     crash (its last keepalive came before), and etcd looks for expired
//     leases every 500 ms. The report also gives when etcd no longer had
//     the lease, polled beside the probe.
//  6. the local invariants on every replica: local_body_after_death (a
//     body ran for a call made on its own replica that began after its
//     owner was observed dead), local_body_after_stop (a body started after
//     its consumer's Stop returned nil, whatever the path), and
//     unauthenticated_body (a body whose plan needs a role ran for a call,
//     local or forwarded, without the valid credential, or saw another
//     principal).
//  7. lost_session_claim_lives: a consumer whose claim was made under a
//     session its replica has since lost still lives once the loss is
//     handled. The claim's lease is the one the watch saw on the put that
//     created its key, so a start that straddles a loss (a claim made
//     across it, which invariant 1 cannot judge) is judged too; and a
//     replica opens its next session only after killing every consumer
//     registered under the last, so when its current lease, read first,
//     is another, the consumer must already be dead. Each consumer is
//     judged once, in the 50 ms sampler or at the end.
//  8. forged_listed: a listing shows a forged record (a name the forger
//     made up, or a descriptor it altered): every replica's catalog
//     ListTools and ToolsPage after each forged write, one MCP tools/list
//     then, and every resolver's tools/list; a tools/list that fails on a
//     replica that is up, while forged records are in etcd, counts too.
//     forged_followed: a replica's Peer locates a made-up name at all, or
//     any name at the trap, after each forged write; or the trap receives
//     a request, whatever it carries. Records that nobody signs are
//     believed by every replica, so this invariant fails until replicas
//     check a MAC on every record (issue 25); a run's report says how many
//     of the genuine records the forger copied carried one.
//  9. task_outlived_consumer: a tasks/get through a replica other than
//     the task's holder, begun after the task's consumer was observed
//     dead, read the task working: a task ends with its consumer, read
//     from anywhere.
//  10. task_answered_by_other: a completed task's result is not the
//     answer its own consumer's body gave for it (another task's, or
//     another consumer's); or a task read failed with replica_lost while
//     its holder was up.
//  11. update_after_death: an Updated call of a fixed resource consumer,
//     begun after its death was observed, returned nil rather than
//     ErrDeadOwner; or a subscriber on a replica other than the holder
//     heard an update of a URI whose only publishes before it came from
//     such calls. What a subscriber hears cannot be traced to one publish
//     (the server coalesces updates, and tells subscribers once, with no
//     publish, when a subscription moves, is dropped or its stream is
//     reopened), so the subscriber asks only for a cause: a publish on
//     the URI, begun before the update was heard, by a consumer not
//     observed dead by then. An update with no publish before it at all
//     is inconclusive. This side is weak by design: once a live consumer
//     has published on a URI, every later update of it has a cause; the
//     publisher's side is what catches a dead consumer's update.
//  12. notification_order: a call with a progress token, answered by the
//     body that reported 1, 2 and 3, local or forwarded: the caller's SDK
//     client (its ProgressNotificationHandler, which may run after
//     CallTool returns) heard the reports in the order made, each once,
//     and all of them within 2 s of the result; and the body had a Client
//     to report to. It reads the client's handler, not the wire: that the
//     reports precede the result on the wire is not checked. A report that
//     failed in the body makes the count inconclusive.
//  13. impostor_trusted: a replica that is up lists (catalog ListTools)
//     or locates (Peer) a name the impostor claims, checked every 100 ms,
//     or the impostor's listener receives a request, whatever it carries
//     (impostor.go); the report counts the requests that held the fleet
//     token or a caller's token, in a header value or the body.
//
// Errors that no invariant names but that a correct fleet never produces
// (a consumer that dies with nobody ending it and no session lost, a
// replica that does not open a new session, a forwarded call that gets
// peer_unavailable although the replica it located is up, a Stop that
// fails) are counted and listed, and fail the run like violations.
//
// # Report
//
// The report gives latency percentiles (HdrHistogram) of local and
// forwarded tools/calls under the load and in the quiet phase, of
// listings, starts (a claim included) and stops (a release included); the
// forward overhead at p50 (quiet, and under load) against its 1 ms target;
// claims per second; the failures made and sessions lost; how soon the
// crashed replicas' names were free; the convergence time; what the
// forger wrote, by kind, whether the genuine records it copied were
// signed, and the requests its trap received (how many carried the fleet
// token, how many a caller's credential); and checks, inconclusive cases
// and violations per invariant; and the surface's counts: starts and
// claims by kind, prompt gets and templated reads by outcome, updates
// published, refused and heard, subscriptions, and progress calls by
// outcome. Exit codes, the verdict and the latency
// figures are computed as in the in-process world, by the subpackages of
// cmd/internal/loadgen both worlds share.
package fleet
