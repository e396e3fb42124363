// Package mcpserve serves a [catalog.Catalog] through the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp), over streamable HTTP, stdio
// or any other [mcp.Transport]. docs/mcpserve.md in the repository gives
// the reasons, the wire details and the guarantees in depth; this is the
// model in short.
//
// # Model
//
// The catalog is the single source of truth. Consumers start and stop their
// routes in it; a [Server] answers tools/list, resources/list,
// prompts/list and resources/templates/list with exactly the catalog's
// live, ready entries and its cursor pagination, and tools/call,
// resources/read, prompts/get and completion/complete through the
// catalog's dispatch: one lock-free resolve, the guard of the plan
// registered by the same owner, the route's admission gate, and the body,
// on the request's own goroutine. Nothing is copied into the SDK's tables,
// so nothing can advertise a route whose consumer has died. A receiving
// middleware ([mcp.Server.AddReceivingMiddleware]) answers those methods
// before the SDK's handlers run; every other method (initialize, ping,
// logging) goes on to the SDK. Routes added to [Server.MCP] with the
// SDK's Add methods are therefore not served.
//
// The package does four jobs, in files named for them:
//
//   - dispatch and conversion (dispatch.go, calls.go, content.go,
//     prompts.go, complete.go, resultlimit.go): a catalog answer becomes
//     an MCP result, and a catalog error a JSON-RPC error or a tool
//     result with isError;
//   - notifications and streams (notify.go, subscribe.go, subindex.go,
//     listenstreams.go, tasknotify.go): list_changed coalesced per
//     [Options.NotifyWindow], resources/updated to subscribers,
//     subscriptions/listen streams, task status notifications;
//   - the HTTP front (front.go, exposure.go, sessionslots.go, shares.go,
//     decode.go, screen.go, hygiene.go, redact.go, timeouts.go,
//     httpserve.go): exposure and credentials, session binding and slots,
//     per-client shares of each cap, one strict decoding of every body
//     and one value for each protocol header (decode.go, before any other
//     reader), the screening of what a client sends, the
//     redaction of session IDs, server timeouts, serving and shutdown;
//   - the fleet hop (fleet.go, forward.go, hop.go): forwarding a call to
//     the replica that holds its route, and answering calls forwarded
//     here; subscriptions to another replica's resources (fleetsubs.go,
//     fleetstream.go, fleetsubcheck.go);
//   - the fast path (fastpath.go, fastwrite.go): see below.
//
// # Errors on the wire
//
// An unknown, not-ready or dead route, and one whose owner died between
// the lookup and the admission, are JSON-RPC -32602 (the gone one with
// data {"reason":"route_gone","retryable":true}). Invalid arguments are
// -32602 and the body does not run. A denial by the route's plan is a tool
// result with isError for tools/call, and [CodeDenied] for resources/read;
// it never quotes the credential. A panicking body is a generic isError
// result (-32603 for a read); an overloaded route is [CodeOverloaded]; a
// result over [Options.MaxResultBytes] is refused with an error that
// states the limit. A tool's own error is its isError result.
//
// # Credentials and sessions
//
// The credential handed to the catalog's guard is the bearer token of the
// HTTP request that carried the call; a request with two Authorization
// headers is refused. Transports without headers present none, unless
// [Options.TransportCredential] gives one. With an authenticator and a
// stateful handler, every HTTP session is bound to the principal that
// created it: another principal's request on it gets 403.
// [Options.RequireCredential] says which HTTP requests must carry a valid
// token at all ([CredentialAuto]: every one beyond loopback). Session IDs
// never reach the logger, only their fingerprints.
//
// # Every client generation on one endpoint
//
// MCP 2026-07-28 ([ProtocolStateless]) has no sessions: a client
// discovers the server, names the revision in every request, and hears
// list_changed on a subscriptions/listen stream, capped by
// [Options.MaxListenStreams]. A Server (stateful, the default) serves
// those requests on the same endpoint as its sessions, through the SDK's
// stateless handler, and they hold no session slot; clients of
// 2025-11-25 and earlier initialize a session, with list_changed on its
// standalone stream. [Options.Stateless] keeps no session at all: older
// clients are then served one request at a time, without list_changed or
// requests of a body's own (sampling, elicitation), and options that only
// sessions give a meaning to are [ErrInvalidOptions].
//
// # Input rounds
//
// A body asks its caller for input with catalog.Ask (or Call.Elicit,
// Call.Sample) and the same code serves every client. A session of
// 2025-11-25 is asked mid-call, on the call's response stream. A client
// of 2026-07-28 cannot be: the call ends with an input_required result
// (SEP-2322) holding the questions and a requestState, and the client
// calls again with its answers, which the body, run again from its start,
// gets from Ask. The state is sealed with an HMAC under
// [Options.RequestStateKey] and binds the retry to the method and route,
// to a hash of the call's arguments (canonical JSON: key order and
// spacing do not count), to the round, to the consumer instance whose
// body asked, and to the caller's credential, until it expires
// ([Options.RequestStateTTL], 5 minutes by default): a tampered state,
// another caller's, another route's or other arguments', or an expired
// one, is -32602 (reason "invalid_request_state") and nothing runs.
// Within its TTL a state may be presented again for the same call, so
// that a client can retry a round whose answer it lost. A retry whose
// consumer died or was replaced is -32602 route_gone, retryable, and never
// reaches a successor. Answers are checked against what was asked (a
// form's against its schema); answers to questions not asked are ignored.
// The state carries every answer so far, so the server keeps nothing
// between rounds, and in a fleet a retry may come through any replica.
//
// # Tasks
//
// A 2026-07-28 request that negotiates the tasks extension (SEP-2663)
// takes tasks: a body that calls catalog.Call.Detach ends the call with a
// CreateTaskResult, and the rest runs as a catalog task, which tasks/get,
// tasks/update and tasks/cancel (answered by the front, which the SDK
// does not know) read, answer and end, with the credential that started
// it alone, authenticated again on each (401 once expired or revoked),
// after the Host, Origin, Content-Type and Accept checks of every request
// (taskfront.go). A task counts against its caller's share of the
// catalog's task caps, its principal or else its address, and lives no
// longer than its consumer nor catalog.Config.MaxTaskLifetime. A subscriptions/listen
// that names tasks (its filter's taskIds) hears each change of those the
// same credential can read as notifications/tasks, until each ends, its
// consumer's death included.
//
// Serving a fleet whose Peers implement TaskHolders (package etcdfleet's
// Replica does), a task's ID names the replica that holds it, under a MAC
// of the fleet's that binds the mark of the caller's credential: a call
// forwarded to
// the holder may start a task, and tasks/* sent to any replica reach the
// holder over the fleet hop, once. A holder whose lease stands but which
// cannot be reached gives CodePeerUnavailable, retryable; once its lease
// expired, its tasks read failed, reason replica_lost. An ID no replica
// minted for the caller is unknown, and goes nowhere (fleettasks.go).
//
// # The fast path
//
// The hot methods (tools/call, tools/list,
// resources/read, resources/list, resources/templates/list, prompts/get,
// prompts/list) of 2025-06-18, 2025-11-25 and 2026-07-28 requests are
// served from the HTTP request itself: the body is read once into a
// pooled buffer, the envelope and params decoded as the SDK decodes them,
// the same answer and hygiene run on the request's goroutine, and the one
// response written as application/json (as server-sent events only when
// the call logs or reports progress before its result). The SDK's
// transport, a session per request and two goroutine hand-offs per call,
// is skipped; everything else, and every request the fast path cannot
// judge exactly as the SDK would, goes to the SDK. Both paths answer
// alike, message for message: TestFastPathMatchesSDK and FuzzFastPath
// hold them to it. A session's requests take the fast path once its client
// sent notifications/initialized, unless the client takes sampling or
// elicitation; the Server then keeps the session's log level, its
// cancellations and its idle timeout itself (sessionfast.go,
// sessionidle.go).
//
// # Visibility
//
// tools/list and resources/list show every live route to every caller,
// whatever its plan, and a denied resources/read answers [CodeDenied]
// where an unknown one answers -32602: route names, URIs and descriptions
// are public, so put nothing secret in them.
//
// # Exposure and bounds
//
// [Server.Serve] and [Server.ListenAndServe] fail closed: beyond loopback
// without an authenticator they return [ErrExposed] before a request is
// accepted ([CheckListenAddress] and [CheckExposure] judge an address
// alone). What a client anyone can reach could exhaust is bounded: idle
// sessions time out ([Options.SessionTimeout]), sessions, listen streams
// and subscriptions are capped, each cap split between clients
// ([Options.ClientShare], [Options.AnonymousShare]), and Serve applies
// [Limits]. Names, ids, URIs and methods are bounded before any work is
// done on them, and no error quotes more than 64 bytes of a client's
// string. Cross-origin browser requests need [Options.AllowedOrigins].
//
// A subscription is judged as a read is: resources/subscribe and each
// resource subscription of a subscriptions/listen run the plan of the
// route that serves the URI for the caller's credential, and a refused
// caller gets its read's error with nothing recorded. An update reaches
// only the subscribers that still pass, judged again once a principal
// has expired or another owner serves the URI, not per update; one that
// fails is dropped without a word (subjudge.go).
//
// # Call contexts
//
// A route body's context ends, with a cause that says why, when the HTTP
// request that carried the call ends or its session is about to close (a
// DELETE, the end of [Server.ServeTransport]'s context, [Server.Close],
// the end of a graceful shutdown's grace). Closing waits at most
// [Options.ShutdownTimeout] whatever bodies do.
//
// # Serving a fleet
//
// With [Options.Fleet], a tools/call, resources/read, prompts/get or
// completion/complete for a route that [Fleet.Peers] places on another
// replica is forwarded there, one
// pooled keep-alive POST of a stateless request that the holder's fast
// path answers; the holder serves it through its own catalog, under its
// live owner's plan, and its progress notifications and log messages
// reach the caller before the result. Every request on the hop is signed
// by the forwarding replica ([Fleet.Identity]: [NewKeyring], or package
// etcdfleet's Replica) over its method, URI, the holder's endpoint, a
// timestamp, a nonce, its body and the caller's principal assertion:
// the subject, roles and expiry the forwarder authenticated, and a
// one-way mark of the caller's credential (an HMAC under a key derived
// from [Fleet.Token]) that tasks and requestStates are bound to on every
// replica alike. The holder judges the plan on that principal, until the
// assertion expires (a minute at most); neither the caller's token nor
// the fleet token crosses the hop.
// [Server.FleetHandler] answers forwarded calls, only those signed by a
// replica that [Fleet.Identity] believes, for this replica's endpoint,
// within [Fleet.ReplayWindow] and with a nonce not seen within it (401
// otherwise), and never forwards again: a call crosses at most one hop.
// An unreachable or frozen holder gives [CodePeerUnavailable], retryable
// when the body surely did not run. A body on the holder asks a
// forwarded call's caller as it would a local one's: a 2026-07-28
// caller gets the holder's input_required result, and its retry, through
// any replica, is judged there; a 2025-11-25 session is asked each round's
// questions mid-call by the replica it is on, which forwards the call
// again with the answers. A templated read goes to the template that wins
// its URI fleet-wide (the catalog's rule over the fleet's listing, see
// catalog.ElsewhereError), so that every replica answers a URI alike.
// A subscription (resources/subscribe, or a subscriptions/listen's
// resourceSubscriptions) to a fixed resource that Fleet.Peers places on
// another replica is followed there: one subscriptions/listen stream per
// peer carries every URI this replica's clients follow on it, and each
// update it carries reaches them as a local one. The peer judges each
// subscribe first by its route's plan for the caller (fleetsubjudge.go).
// The subscribe fails with
// [CodePeerUnavailable] (retryable) when the peer cannot be reached. The
// subscription follows the resource to another holder, here or on another
// replica, and is dropped, its subscribers told once, when no replica
// serves it. Subscriptions to a template's URIs are not forwarded.
//
// # Concurrency
//
// A Server is safe for concurrent use. Its handlers run on the SDK's
// per-request goroutines and share the catalog, a few atomic words of the
// notifier, and the table of sessions and calls in flight (one mutex, and
// one per session). Its own goroutines are the notifier, the sender of
// resource updates and the re-check of subscriptions after a death, which
// [Server.Close] stops, and one per session that forgets the session when
// it ends. Serve and ListenAndServe run an http.Server until their context
// ends; ServeTransport and ServeStdio serve one session.
package mcpserve
