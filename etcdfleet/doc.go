// Package etcdfleet makes the route names of many catalog replicas one
// namespace, on etcd: a name a live consumer serves on one replica is
// refused on every other, and a name whose consumer died, on whichever
// replica, is free everywhere.
//
// # The model
//
// A process joins the fleet with [Join] and sets the [*Replica] as its
// catalog's [catalog.Config.Claimer]. Every consumer start then claims its
// name in etcd after registering it locally and before it is ready:
//
//	<prefix>/tools/<name>        for a tool
//	<prefix>/resources/<uri>     for a resource
//	<prefix>/prompts/<name>      for a prompt
//	<prefix>/templates/<key>     for a resource template (its variables renamed)
//
// the name path-escaped, so that a URI's slashes stay in one segment.
// Beside its claims, each replica keeps its membership,
//
//	<prefix>/replicas/<name>     the replica, its endpoint and incarnation
//
// put under its lease whenever a session opens: package mcpserve's tasks
// across a fleet name their holder by it ([Replica.Stamp],
// [Replica.Locate]), so that any replica can tell a holder that is alive
// from one whose lease expired, even once it holds no claim. The
// claim is one Txn that puts the key only if it does not exist
// (CreateRevision == 0), attached to the replica's lease; the value
// ([Record]) names the replica and the owner and describes the route. A
// claim that finds the key gives [catalog.ErrDuplicate], whoever holds it.
//
// Each replica holds one lease, kept alive by a concurrency.Session, for
// all its claims: liveness across processes is the lease's, and inside a
// process it stays the owner token's (ADR-0068). A consumer's death by any
// path (Stop, its context cancelled, a panic, being dropped) releases its
// claim, from Stop or from the catalog's reclaim of the dead route. The
// release deletes the key in a Txn that compares its create revision with
// the one the claim got: a late release, of a replica whose key expired and
// was claimed again, never deletes the successor's key. A failed release is
// retried for as long as the session lasts.
//
// # The sequential contract
//
// Every start, stop, death, crash and lease expiry across the fleet takes
// effect at one instant between its call and its return, in one order
// that every replica sees, as in this sequential specification. A start
// succeeds only on a name without a key and, with a cap, below it; it is
// refused as a duplicate only while the key exists (or, on a replica whose
// lease expired behind its back, while its own catalog still holds the
// name), for the cap only while the kind holds the cap. A Stop deletes its
// own key, never a successor's, before it returns. A lease that expires
// deletes all of its replica's keys at once, and a start on that replica
// may then fail with ErrSessionLost. Two steps come at some later moment
// of their own: the release of an owner that died (its catalog's reclaim)
// and the expiry of a crashed replica's lease. The package's tests check
// recorded concurrent histories against this specification.
//
// # The fleet cap
//
// With Config.Cap set, the fleet holds at most Cap tools and Cap resources,
// over all replicas, decided at one instant: a claim reads the key and the
// count of its kind's keys at one revision R, and puts the key in a Txn
// that also requires no key of the kind to have been modified after R. A
// claim that finds the cap full at its revision is refused with
// catalog.ErrCapReached; one whose compare fails because another claim
// committed reads again from that Txn's answer and decides anew, bounded by
// its context. The cap holds at every revision, whatever the replicas race.
//
// A slot is a key. A consumer that stops, or dies by any path, on a live
// replica frees its slot with its release, one Txn after the death; a
// crashed or partitioned replica's keys hold their slots until its lease
// expires, as they hold their names. A full fleet therefore refuses new
// names for up to a TTL after a replica crashes.
//
// # Crashes and partitions
//
// A replica that crashes stops renewing its lease; when the lease expires
// etcd deletes all of its keys in one revision, and any replica may claim
// the names. Until then they stay claimed: a crash costs its names up to
// the TTL (Config.TTL, 5 s by default; the server raises short TTLs to 1.5
// election timeouts), plus the time etcd takes to notice.
//
// A session that ends while the replica runs (its lease expired during a
// partition, its keepalives stopped) is treated as a death, by the rule
// ZooKeeper applies to an expired session: the replica kills every local
// consumer that held a claim under it, so their Done channels close
// exactly as if they had crashed, revokes the old lease if it still can,
// and opens a new session. A consumer that should keep serving restarts
// through its own supervision and claims its name again, on the new
// session, if nobody took it meanwhile. Claims made while the replica is
// between sessions wait for the new one, bounded by their context.
//
// The kill runs when this replica's client gives the lease up, which it
// does a TTL after the last keepalive answer it saw; the server expires the
// lease a TTL after the last keepalive it received, which was earlier. So
// in a partition another replica can claim a name a little before the old
// holder's consumer is killed: for that window, bounded by the time a
// keepalive takes to make a round trip, two consumers may serve one name.
// A claim is what keeps names apart, not a fence on the work a body does.
//
// # The view
//
// Each replica also follows the prefix: a watch, resumed from the revision
// after the last one it saw and requiring a leader (a member cut off from
// the cluster would otherwise keep it waiting forever), feeds
// [Replica.View], every replica's claims as of one revision, with sorted
// listings, a Version and a Changes channel. When the revisions it needs
// have been compacted away, or a new session must show a hidden view, it
// lists the prefix again in one Get, at once. Every listing comes after
// its watch has opened from the current revision, and the follower skips
// the events the listing already holds: a watch opened from a revision
// already past would wait for etcd's catch-up loop, up to 100 ms, before
// it delivered anything. The view is read-only and eventually consistent:
// a claim or release shows in it once the watch delivers it.
//
// [Replica.Remote] is the view as a [catalog.Remote] and a
// [catalog.RemoteSurface]: set it as the catalog's Config.Remote, and the
// catalog's listings of tools, resources, prompts and templates, its pages,
// Version and Changes are the fleet's, so that a server built on it
// (package mcpserve) lists every replica's routes and sends list_changed
// when a consumer on another replica starts, stops or dies; its
// ReadResource then sends a URI to the fleet's most specific template
// (see catalog.ElsewhereError). A call is served only where the route's
// consumer runs; with Config.Advertise set, each claim records the
// replica's internal endpoint, and [Replica.Peer] locates a route's holder
// for package mcpserve's Fleet, which forwards tools/call, resources/read,
// prompts/get and completion/complete there.
//
// [Replica.Close] leaves the fleet: it kills the consumers that hold claims
// and revokes the lease, freeing all their names in one revision.
//
// # Connecting securely
//
// An etcd that others can reach must not take writes from strangers:
// whoever writes the prefix decides what every replica lists, and where
// its calls go. Config.TLS ([TLSFiles] reads it from PEM files) makes the
// client speak TLS to https:// or unixs:// endpoints, with a client
// certificate if the cluster wants one; Config.Username and
// Config.Password log in as an etcd user, for a cluster with auth on
// (etcdctl auth enable). Such a user needs a role with readwrite
// permission on the keys under the prefix, and nothing more (package
// embedded's GrantPrefix makes one). A wrong password fails Join with
// ErrAuthFailed, which quotes the user, never the password. Command
// livereg-mcp's -etcd-embedded runs its etcd with auth on: root's password
// is random and stays in the data directory, and the replicas log in as a
// user of the prefix alone.
//
// # Who a replica is
//
// Each replica has its own Ed25519 key pair (Config.Key, or one drawn at
// Join for the process). The fleet authority, an Ed25519 key derived from
// Config.Token with HKDF-SHA256 and a label of its own, enrolls it: at
// Join, and again with each new session, the replica puts its enrollment,
//
//	<prefix>/enroll/<name>       the replica's name, public key and endpoint
//
// signed by the authority over the key it is stored under and its fields,
// attached to the replica's lease, in the same Txn as its membership and
// before any claim: a follower always sees a replica's enrollment before
// a record the replica signs, whether it follows the watch or lists the
// prefix again (after a compaction, say), since it applies the
// enrollments and revocations of a listing or a watch response before its
// records. The token itself never leaves the process, and nothing stored
// in etcd (enrollments, signatures, records) gives it, the authority's
// key or any key derived from it away.
//
// A follower believes a record only if it is signed by the enrolled key
// of the replica the record names, and only if the record's endpoint is
// that replica's enrolled endpoint: a replica signs only its own records,
// and a record signed by A for a name on B is dropped. When a replica's
// enrollment changes (a restart with a new key), goes or is revoked,
// every record the view holds of it goes with it; those it signs under a
// new enrollment come after that enrollment.
//
// Revocation. [Replica.Revoke] puts, for good, a revocation signed by the
// authority,
//
//	<prefix>/revoked/<key>       the revoked public key (base64url)
//
// and revokes the lease the replica's enrollment hangs on. Every follower
// that sees the revocation drops the revoked replica's records at once,
// and [Replica.Verify] refuses the key: the bound is the follower's lag
// behind etcd (a watch event), and for a replica cut off from etcd the
// TTL, after which it loses its session and hides its view, and Verify
// refuses every replica until it lists the prefix again. Deleting a
// revocation revokes nothing back: a follower keeps the revocations it has
// seen. The revoked process cannot open a session with that key again
// (Join, and each new session, check in the same Txn that no revocation
// names it: ErrRevoked). The others go on serving; nobody restarts.
//
// [Replica.Self], [Replica.Sign] and [Replica.Verify] are package
// mcpserve's Identity for the fleet hop: a forwarder signs each request
// with its own key, and the holder verifies it against the forwarder's
// enrollment as its view has it now, without a round trip to etcd.
//
// Why Ed25519 keys enrolled by an authority, and not mTLS with a fleet CA:
// records sit in etcd and are read by every replica long after the
// connection that wrote them is gone, so they must carry their own
// signatures whatever the transport; the same key then signs forwarded
// requests, whose signature also covers a timestamp and a nonce (package
// mcpserve), which TLS alone would not bind to the request. Revoking a key
// is one record every replica already watches, where a CA would need a
// revocation list or short-lived certificates distributed out of band.
// TLS still protects the hop and etcd connections from sniffers; it is not
// what names a replica.
//
// What token mode still trusts. With the authority derived from the token,
// every holder of the token can enroll keys: a revocation shuts out a key
// (a leaked one, a retired replica), not a holder of the token, who can
// enroll a fresh one. To shut such a holder out, rotate the token (see
// "Rotation" below).
//
// # What a replica trusts
//
// Anyone who can write the prefix in etcd could otherwise list a route on
// every replica, or point a genuine route at a listener of their own and
// receive every forwarded call. So a replica believes a record only if
// the replica it names wrote it, and only if it is a route a replica could
// have written.
//
// Signed records. Every record carries, in its flat "sig" field, the
// Ed25519 signature (base64url) of the replica it names, by its enrolled
// key, over the key, the lease the key is attached to and the record's
// canonical JSON encoding with the signature empty: replica, endpoint,
// owner, kind and descriptor. A follower decodes the value, encodes the
// decoded record again and checks the signature of that against the
// enrollment of the replica the record names (see "Who a replica is"):
// what it checks is exactly what it then uses. A record without a valid
// signature (none, a wrong one, another replica's, a signed record with
// any field changed, a signed value copied under another key or put again
// without its lease), of a replica not enrolled or revoked, or whose
// endpoint is not its replica's enrolled one, is dropped. So is an
// enrollment or a revocation the authority did not sign for its key.
//
// Validated records. A signed record must also be a valid route for its
// key: its kind is its directory's, it carries that kind's descriptor
// alone, which names the key's name, a tool name passes the rules a local
// start applies, and so do a prompt's name and arguments
// (catalog.CheckPrompt) and a template's URI template, whose key
// (catalog.TemplateKey) must be the key's name; a tool's input
// schema is a JSON object of "type": "object" (MCP requires it, and a
// client may refuse a whole listing over one that is not) and its output
// schema a JSON object; its endpoint, if any, is http or https, ends in
// Config.PeerPath and names a host Config.Peers allows (CIDRs, or names
// compared without resolving them). A claim whose own record would fail
// this is refused with catalog.ErrInvalidRoute, so that every replica lists
// what any one lists.
//
// A dropped record is neither listed (View, Remote) nor located (Peer),
// and a put of one over a key removes the key from the view: what the key
// held before is gone from etcd. Each drop counts in [Replica.Rejected];
// the log names each key once, at most one line a second. [Replica.Peer]
// also never names this replica's own advertised endpoint, whatever
// replica a record names.
//
// Rotation. The authorities derived from PreviousTokens are accepted for
// enrollments and revocations, never used to sign one. A fleet rotates
// from T1 to T2 with three rolling restarts: every replica on Token T1
// with PreviousTokens [T2]; then on T2 with [T1]; then on T2 alone. In
// each mixed state every replica accepts every other's enrollment, and so
// its records; at the end no enrollment signed by T1's authority is
// believed, and a holder of T1 alone can enroll nothing.
//
// Overwritten claims. A replica's follower also watches its own claims.
// If one of its keys changes to anything it did not write (another value,
// the same value without its lease), it puts its record back, attached to
// its lease, in a Txn fenced by the claim's create revision: the key never
// ceased to exist, so nobody else can have claimed the name. If the key
// was deleted (or deleted and claimed anew) while its lease lives, the
// replica gives the claim up and kills its consumer, as a lost session
// does: no two replicas go on serving the name, and none lists a name that
// nobody serves. Between the deletion and the moment the follower hears of
// it another replica may claim the name, so for that window, as in a
// partition, two consumers may serve it.
//
// What this does not stop. A writer of the prefix can still delete keys
// (their holders then give the names up; an enrollment deleted or
// overwritten hides its replica's records from every view until its next
// session puts it again), replay a genuine value on the key and lease it
// was signed for while that lease lives, which names the replica that
// wrote it, and claim names under a lease of its own: its records are
// never listed or located, but the names stay taken. It can also keep a
// crashed replica's lease alive with keepalives, and so its keys: the
// names stay taken for as long as it goes on. They do not stay listed:
// each replica renews its membership every TTL/2 with a signed, growing
// sequence number, and a follower that has seen no renewal of a replica
// for 4 TTLs (by its own clock) holds it stale: its records leave the
// view and Peer, and Verify refuses it, until a renewal with a higher
// sequence number, which no replay has, brings it back. Only etcd's own
// authentication keeps writers out; a writer of the prefix learns no
// secret and can make no replica believe a record it did not sign.
//
// # While etcd stalls
//
// A replica that loses its session (etcd stalled or cut off for longer
// than the TTL) hides its view at the moment it kills its own consumers:
// it lists none of the fleet's routes and locates none, and the versions
// move, so that clients get list_changed. Its view may be stale and its
// own claims are gone, and a listed route would be answered "unknown". It
// lists and locates them again once it has a new session and has listed
// the prefix afresh under it.
//
// # A view lags
//
// A view is exact for its revision, and follows etcd by the watch's
// latency. When a name's consumer stops and a successor claims the name,
// on the same replica or another, a view that applies the release in one
// watch response and the claim in a later one holds no record of the name
// in between: a replica locates it nowhere, and a call through it is
// "unknown", although the successor's start may have returned already
// (TestForwardThroughAViewBetweenClaims). A record's Owner tells the
// successor's record from its predecessor's on the same replica.
//
// # Cost
//
// A claim and a release are one Txn round trip each (a capped claim two,
// and one more for each claim of its kind that commits in between), on the
// start and stop paths only: a catalog's lookups and calls never touch
// etcd, and a catalog without a Claimer runs exactly as before. Signing a
// record costs one Ed25519 signature; checking one costs the follower a
// JSON decode and encode and one Ed25519 verification
// (BenchmarkVerifyRecord), once per record listed or watched: never on a
// call. Verify costs one Ed25519 verification per forwarded request. Each
// replica renews its membership every TTL/2: one Txn, and one watch event
// for every replica, which lists nothing new and so moves no listing's
// version.
package etcdfleet
