// Package mcpserve serves a [catalog.Catalog] through the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp), over streamable HTTP, stdio
// or any other [mcp.Transport].
//
// # Model
//
// The catalog is the single source of truth. Consumers start and stop their
// tool and resource routes in it ([catalog.Catalog.StartTool],
// [catalog.Catalog.StartResource]); a [Server] answers
//
//   - tools/list and resources/list with exactly the catalog's live, ready
//     entries, in its order, with its cursor pagination
//     ([catalog.Catalog.ToolsPage], [catalog.Catalog.ResourcesPage]);
//   - tools/call and resources/read through the catalog's dispatch
//     ([catalog.Catalog.CallTool], [catalog.Catalog.ReadResource]): one
//     lock-free resolve, the guard of the plan registered by the same owner,
//     the route's admission gate, and the body, run on the request's own
//     goroutine.
//
// Nothing is copied into the SDK's own tool and resource tables, so there is
// no second registry to keep in step and nothing that can advertise a tool
// whose consumer has died.
//
// # Why receiving middleware, not AddTool/RemoveTools
//
// The SDK offers two hooks. Mirroring the catalog with [mcp.Server.AddTool]
// and [mcp.Server.RemoveTools] would put every tools/call behind the SDK's
// server-wide mutex (its tool lookup locks it), keep a second copy of every
// entry that lags the catalog between an owner's death and the mirror's
// update (a window in which a dead tool is listed and resolved by name), and
// turn a restart storm into a storm of table rewrites. A receiving middleware
// ([mcp.Server.AddReceivingMiddleware]) intercepts the four methods before
// the SDK's own handlers run and answers them from the catalog, so the hot
// path is the catalog's: two lock-free hash lookups (the route and its
// plan), the gate's few atomic operations and the body, on the goroutine
// the SDK gave the request, with no SDK lock taken. The same middleware
// answers prompts/list, prompts/get, resources/templates/list and
// completion/complete from the catalog (see "Prompts, templates,
// subscriptions and completions"); every other method (initialize, ping,
// logging) goes on to the SDK untouched. The cost is that tools,
// resources, prompts and resource templates added to [Server.MCP] with
// the SDK's Add methods are not served: start catalog consumers instead.
// The SDK's validation of tool arguments against the input schema runs in
// the handlers this middleware bypasses; the catalog checks them instead,
// against the tool's compiled input schema, before the body runs (invalid
// arguments are -32602).
//
// # Prompts, templates, subscriptions and completions
//
// Prompts ([catalog.Catalog.StartPrompt]) are a third kind of route, under
// the same owner discipline: prompts/list pages through
// [catalog.Catalog.PromptsPage] as tools/list does, and prompts/get runs the
// prompt's handler through [catalog.Catalog.GetPrompt]. A prompt whose owner
// died, before the lookup or between it and the admission, answers exactly
// as an unknown prompt: -32602. A missing required argument is -32602 and
// the handler does not run; a denial is [CodeDenied].
//
// resources/templates/list pages through the catalog's resource templates
// ([catalog.Catalog.StartResourceTemplate]), and resources/read goes
// through [catalog.Catalog.ReadURI]: a live fixed resource with the URI
// wins, and otherwise the most specific live template that matches it
// reads it (the most literal text; between equals, the smaller template
// string).
//
// resources/subscribe is refused with the specification's
// resource-not-found error (-32602) when no live route, fixed or templated,
// serves the URI. A consumer's [catalog.Consumer.Updated] sends
// notifications/resources/updated to the sessions subscribed to its URI,
// and to no other, from a goroutine of the server's; updates of one URI
// published while one is being sent go out as one. When the owner of the
// route behind a subscribed URI dies (it stopped, was cancelled or
// panicked), the URI is looked up again one notify window later: if
// nobody serves it then, each subscriber is told once,
// notifications/resources/updated (around the resources list_changed that
// drops it from the list, in no fixed order: the two are sent from
// different goroutines so that neither waits for the other); the
// subscription is then dropped, and a consumer that starts serving the
// URI later has no subscribers until clients subscribe again. When the
// route changed hands instead, because a successor took the URI over
// within that window (a restart), subscribers get one updated and stay
// subscribed. The re-check costs one lookup per subscribed URI of the
// owner that died, whatever else is subscribed: the table indexes URIs by
// the owner serving them, and looks them up with no lock held. A session
// holds at most [Options.MaxSubscriptionsPerSession] subscriptions (256),
// all sessions together [Options.MaxSubscriptions] (16,384), split between
// clients as every cap is (see "Exposure"); beyond them a subscribe to a
// new URI gets [CodeOverloaded] with data {"reason":
// "too_many_subscriptions"} ([ErrTooManySubscriptions]) and changes
// nothing. The
// table of subscriptions forgets a session when it ends and a URI when its
// last subscriber leaves or its route is gone, and removes both from the
// SDK's own table as well. A client of the 2026-07-28 revision subscribes
// on its subscriptions/listen stream; the same rules apply, and the SDK
// drops its subscriptions when the stream ends.
//
// completion/complete reaches the completer that the prompt's or
// template's consumer started it with ([catalog.WithCompleter]), through
// the route's plan and admission gate: the completer dies with its
// consumer, and a completion for a dead owner's route answers as for an
// unknown one (-32602). A route without a completer answers no values.
//
// # Capabilities and list_changed
//
// The server advertises tools and resources with listChanged: true from the
// first initialize, even while the catalog is empty, resources with
// subscribe: true, prompts with listChanged: true unless the catalog holds
// no prompts ([catalog.Catalog.HoldsPrompts]), and completions when the
// catalog can hold prompts or templates. Prompts get prompts list_changed
// the way tools do, through a hidden sentinel prompt; a change to the
// templates goes out as resources list_changed, as MCP has no notification
// of its own for them.
//
// One goroutine per Server follows the catalog: it takes
// [catalog.Catalog.Changes], reads [catalog.Catalog.ToolsVersion] and
// [catalog.Catalog.ResourcesVersion], and waits for the channel to close.
// When a version moved since the last notification it has the SDK send
// notifications/tools/list_changed (or resources) to every session, then
// holds off for the coalescing window ([Options.NotifyWindow]) before it
// looks again, so a burst of any size costs each client at most one
// notification per window, and the last change of a burst is always followed
// by one. There is no polling: between changes the goroutine sleeps on the
// channel, and the window's timer is armed only after a notification went
// out. An owner's death is a change like any other: the catalog reclaims a
// dead owner's routes as soon as the owner's Done channel closes, bumps its
// version and closes the channel. A listing or a lookup can meet a dead
// entry before the route's own goroutines reclaim it, and that bumps the
// version first; so after each of the four methods it answers the server
// compares the versions (a few atomic loads) and wakes the goroutine at
// once rather than when the reclaim signals.
//
// The SDK exposes no call that sends a list_changed notification by itself;
// it sends one, debounced by 10ms, whenever its own tool or resource table
// changes, to legacy sessions directly and to 2026-07-28 sessions that
// subscribed with subscriptions/listen. The goroutine therefore re-adds one
// hidden sentinel tool (or resource) to the SDK's table to trigger the send.
// The sentinel is never listed or callable: the middleware answers those
// methods from the catalog alone.
//
// # Errors on the wire
//
//   - An unknown, not-ready or dead tool, and a tool whose owner died between
//     the lookup and the body's admission ([catalog.ErrRouteGone]), are JSON-RPC
//     errors with code -32602 (invalid params), as the MCP specification asks
//     for unknown tools. The route-gone error carries data
//     {"reason":"route_gone","retryable":true}: a retry may reach a successor.
//     Unknown and gone resources are -32602 as well, with the URI in data.
//   - Arguments that are not an object or that the tool's input schema
//     refuses ([catalog.ErrInvalidArguments]) are -32602 with the
//     validator's message, cut short; the body does not run. A result that
//     breaks the tool's output schema ([catalog.ErrInvalidResult]) is a tool
//     result with isError true and a generic text; the server logs it.
//   - A denial by the route's plan ([catalog.Denied]: no or bad credential,
//     missing role, expired principal, or a route started without a plan in
//     the catalog's Deny mode) of a tools/call is a tool result with
//     isError true whose text says which of these it was, never the
//     credential or the authenticator's own words; the body does not run. A
//     resources/read has no error result, so its denial is JSON-RPC error
//     [CodeDenied].
//   - A route body that panicked ([catalog.ErrRoutePanicked]) is a tool
//     execution error: a result with isError true and a generic text (the
//     panic value is logged, not sent). For resources/read it is -32603.
//   - A route started catalog.WithMaxConcurrent with every slot taken and
//     its waiting room full ([catalog.ErrOverloaded]) is JSON-RPC error
//     [CodeOverloaded] with data {"reason":"overloaded","retryable":true}: it
//     is the server's condition, not the tool's answer, and a client should
//     back off rather than show it to a model.
//   - Any other error a tool handler returns is its execution error: a result
//     with isError true and the error's text. A resource reader's error is
//     -32603 with its text.
//   - A request whose context ends (the client cancelled, or the session
//     closed) gets -32603; the catalog never leaves it waiting on a dead
//     route.
//   - A result larger than [Options.MaxResultBytes] is not sent: a tool
//     result with isError true, or for resources/read -32603, whose text
//     states the limit; the server logs it at WARN.
//
// # Limits and protocol hygiene
//
// What a client sends is bounded before any work is done on it, on every
// transport by the outermost receiving middleware, and on HTTP also by
// the front, before the SDK parses the body:
//
//   - A URI longer than catalog.Config.MaxURIBytes (8 KiB by default),
//     a tool's or prompt's name longer than [MaxNameBytes], an argument
//     name longer than [MaxKeyBytes], and a log level other than MCP's
//     eight, are -32602. A template variable that decodes to a NUL byte
//     or invalid UTF-8 is -32602 unless its template allows raw bytes.
//   - Over HTTP, a JSON-RPC batch is HTTP 400 with -32600 unless the
//     session negotiated a revision before 2025-06-18, which removed
//     them; so is an id that would not come back as it was sent (beyond
//     ±(2^53-1), not an integer, null, an object, or a string longer than
//     [MaxIDBytes]), with id null. A method name longer than
//     [MaxMethodBytes] is 400 with -32601.
//   - No error quotes more than 64 bytes of a client's string, and one
//     that cuts a string says how long it was; a message longer than 512
//     bytes is cut there too. The middleware bounds every
//     error a handler returns, the SDK's included, message and data; the
//     front bounds on the way out what the SDK writes without a handler
//     (an unknown method, params it cannot decode, an Mcp-Name mismatch),
//     in a plain-text refusal, a JSON reply or an SSE event. Results and
//     notifications pass untouched, at the cost of a look at their first
//     bytes.
//
// Over stdio ([Server.ServeTransport]) the middleware's bounds hold; the
// front's (batches, ids, the method name, what the SDK writes itself) do
// not: the SDK's stdio transport reads its own messages.
//
// # Progress and logs
//
// A tool body's [catalog.Call.ReportProgress] becomes notifications/progress
// with the request's progress token, and nothing when the request carried
// none; its [catalog.Call.Log] becomes notifications/message, sent only at
// or above the level the session set with logging/setLevel. Both go out on
// the request's session before its result.
//
// A body's [catalog.Call.Sample] and [catalog.Call.Elicit] become
// sampling/createMessage and elicitation/create (form mode) to the
// session's client, which the body waits for. They are offered only to a
// client that declared the sampling or elicitation (form) capability in
// its initialize request, on a protocol before 2026-07-28 (which forbids a
// server's own requests while it serves one); otherwise, and on stateless
// sessions, the body gets [catalog.ErrNotSupported] and nothing is sent.
// The request ends with the body's context: a client that never answers
// holds the body until the call is cancelled or its deadline passes, and
// the SDK tells the client with notifications/cancelled. An accepted form
// arrives checked against its schema, with the schema's defaults filled in.
//
// # Call contexts
//
// The SDK runs a handler under a context of its session that it cancels
// only after closing the session's connection, and closing the connection
// first waits for the handlers. Left alone, a body that waits on its
// context would never see it end when its client went away, and a session
// close (a DELETE, [Server.Close]) would wait on the body forever. So the
// context a route body receives ends, with a cause that says why, when
//
//   - the HTTP request that carried the call ends: its client disconnected
//     or gave up, or the SDK released the request;
//   - its session is about to be closed: a DELETE by its principal,
//     the end of [Server.ServeTransport]'s context, [Server.Close], or
//     the end of the grace of [Server.Serve]'s graceful shutdown.
//
// Closing waits at most [Options.ShutdownTimeout] whatever bodies do: Go
// cannot stop a goroutine, so a body that ignores its context runs on, and
// its session finishes closing in the background when it returns.
//
// # Credentials
//
// The credential handed to the catalog's guard is the bearer token of the
// HTTP request that carried the call: the Authorization header, scheme
// "Bearer" (case-insensitive), token trimmed. A header with another scheme
// counts as no credential; a request with more than one Authorization
// header is refused with HTTP 400, so that a proxy in front and the
// catalog can never judge different headers. Transports without headers
// (stdio, in-memory) present no credential, so only public routes answer
// them, unless [Options.Credential] says otherwise. Authentication itself
// is the catalog's: [catalog.Config.Authenticator]. An authenticator that
// panics fails the request closed (an internal error; HTTP 500 where the
// session binding below asked it) and the panic is logged; its value only
// when it is a runtime error, since another value may quote the
// credential.
//
// # Sessions
//
// When the catalog has an authenticator, [Options.Credential] is unset
// and the HTTP handler is stateful, every session is bound to the
// principal that created it: the subject its initialize request's bearer
// token authenticated as, or "anonymous" for no token or an unknown one. A
// request on the session (a call, its standalone stream, a DELETE) that
// presents another principal is refused with HTTP 403, so only the
// creator can use or end it; a client that wants its token's rights opens
// its session with that token. Without an authenticator there is nothing
// to bind to: anyone who knows a session's ID may use or end it, as the
// SDK allows. Session IDs never reach the logger: the server's and the
// SDK's log records carry a SHA-256 fingerprint instead, which still
// correlates the lines of one session.
//
// # Stateless mode
//
// MCP 2026-07-28 ([ProtocolStateless]) has no sessions: a client learns
// the server with server/discover instead of initialize, sends the
// protocol version, its capabilities and its identity in every request's
// _meta, and receives list_changed over subscriptions/listen, a request
// that stays open as a stream of notifications. The SDK serves that
// revision over streamable HTTP only when its handler keeps no sessions,
// so [Options.Stateless] (or [Options.HTTP].Stateless, the same switch)
// runs it that way. Then
//
//   - a client of 2026-07-28 discovers the server, lists and calls tools
//     and resources with the error mapping above, and hears
//     tools/list_changed and resources/list_changed, coalesced by the
//     same notifier, on its subscriptions/listen stream;
//   - a client of an earlier revision still initializes and is served,
//     each POST on a session of its own that lasts the request; it gets
//     no list_changed (there is no standalone stream) and must list
//     again. Nor can a route body send it a request of its own;
//   - the credential is the bearer token of each request, as always;
//     nothing binds requests together, so there is no session binding,
//     and [Options.MaxSessions], [Options.SessionTimeout] and an event
//     store mean nothing: a positive value is [ErrInvalidOptions];
//   - the SDK's INFO lines about each session's connection are logged at
//     DEBUG, since every request is one, and so are its WARNs about a
//     list_changed that an older client's request had no stream for.
//
// A stateful server (the default) offers the 2026-07-28 client no
// 2026-07-28: server/discover answers with the earlier revisions, and
// the SDK's client falls back to initialize at 2025-11-25, with
// list_changed on its standalone stream. So every client gets list_changed
// from a stateful server, and only a stateless one speaks 2026-07-28.
//
// A subscriptions/listen stream, over any transport, counts against
// [Options.MaxListenStreams]: at the cap a listen gets JSON-RPC error
// [CodeOverloaded] with data {"reason":"too_many_listen_streams",
// "retryable":true} ([ErrTooManyListenStreams]), and open streams are
// untouched ([Server.ListenStats] counts them). [Server.Close] ends every
// open stream and refuses later ones; a graceful shutdown of
// [Server.Serve] ends them first, so that it waits for calls, not for
// streams that never end by themselves, and refuses new ones while it
// lasts. An ended stream gets its result; the SDK's client does not
// listen again by itself. A stream's credential is judged once, when its
// request arrives, not again while it stays open.
//
// # Serving a fleet
//
// Many processes can serve one catalog: each replica's catalog claims its
// names fleet-wide and lists the fleet's routes (package etcdfleet), and
// with [Options.Fleet] each replica also answers them. A tools/call or
// resources/read for a route this catalog does not hold, but that
// [Fleet.Peers] places on another replica, is forwarded there, through
// the SDK's own client over streamable HTTP at protocol 2026-07-28
// (stateless: nothing to open or keep per peer but pooled keep-alive
// connections). The holder serves it through its own catalog, so every
// guarantee holds across the hop: the body runs on a live owner, under
// that owner's plan, judged by the credential the original caller
// presented (it travels in a header of its own, beside the fleet
// credential). A forward costs one HTTP round trip on loopback or the
// network; a call for a local route never looks at the fleet.
//
// [Server.FleetHandler] answers forwarded requests; Serve mounts it at
// [Fleet.Path]. It serves only requests that carry the fleet credential
// ([Fleet.Token]) as their bearer token, compared in constant time,
// refuses a hop count above one (508 Loop Detected: every forward
// carries its count, 1), and serves them from the local catalog alone: a
// forwarded call is never forwarded again, so no two views, however
// stale, can make a call loop.
//
// Across the hop a client sees what it would see locally. A consumer that
// died between this replica's lookup and the holder's dispatch gives the
// -32602 route_gone error a local death gives (the holder answers an
// unknown forwarded route that way: the forwarding replica saw it held).
// A forward is bounded by the caller's context, and ends the body's
// context on the holder when it ends. A holder that cannot be reached,
// does not begin its answer in time or answers what a fleet handler does
// not (a redirect, an error page) gives [CodePeerUnavailable] with data
// {"reason":"peer_unavailable", "retryable":R}: R is true when the call
// never left (the connection was refused, or the session to the peer
// could not be opened) or the connection was lost before the holder
// began its answer (a holder begins it before it runs the body: a
// crashed one had not started it), false when the exchange failed after
// the request may have reached the holder's body, or the holder did not
// begin in time (a frozen holder may still run it), which is then
// unknown to have run the body or not. Never "unknown tool" while the
// route is listed.
//
// What a hop guarantees besides:
//
//   - The fleet's credential and the caller's go to the endpoint
//     [Fleet.Peers] named and nowhere else: each peer's requests go
//     through a transport that refuses, unsent, a request for any other
//     URL, and no redirect is followed (whatever [Fleet.HTTPClient]'s
//     CheckRedirect says). A redirect answer is [CodePeerUnavailable].
//   - A replica never forwards to its own endpoint ([Fleet.Advertise],
//     compared with scheme and host in lower case and without the
//     scheme's default port): the view is stale, the route is not here,
//     and the call is answered as one for a route gone.
//   - The public handler ([Server.Handler]) refuses (400) a request marked
//     as forwarded (the hop count or the caller's credential header): a
//     replica that advertised a public endpoint by mistake fails its
//     forwards at once instead of making them recurse.
//   - A forward waits at most [Fleet.ForwardTimeout] (default
//     [DefaultForwardTimeout]) for the holder's response to begin, and
//     opening a session to a peer (one round trip) takes at most as long.
//     The holder begins its response as soon as it dispatches the call,
//     so a route body may run longer, as long as the caller's context
//     allows; a frozen or unreachable peer gives [CodePeerUnavailable]
//     within the bound. The Server's own client opens at most
//     [Fleet.MaxConnsPerPeer] connections to one peer (default
//     [DefaultMaxConnsPerPeer]); a forward past the cap waits for one,
//     within the same bound.
//   - The holder's answer is read through a limit of twice
//     [Options.MaxResultBytes] plus 64 KiB (the result, its JSON
//     envelope and escaping), and the decoded result is counted as a
//     local one is: past either, the caller gets the error a local
//     oversized result gets, and the replica has spent about the limit,
//     not the answer. A result of text that JSON escapes heavily
//     (control characters, <, >, &) may meet the read limit first.
//     Such a refusal fails that call alone; the peer's session serves on.
//
// These cost a forward a context, a timer, a client trace and a clone of
// the request's header (about 14 allocations), and the holder one more
// flush.
//
// Not forwarded: prompts, resource templates, completions and
// subscriptions, which other replicas do not list either. A forwarded
// body's progress and log notifications stay on the hop (the SDK's client
// hands them over after the result), and its Sample and Elicit get
// catalog.ErrNotSupported: the hop is stateless, and a stateless request
// cannot ask its client anything.
//
// # Visibility
//
// Today tools/list and resources/list show every live route to every
// caller, with its description, whatever its plan: a caller without a
// credential sees admin-only routes exist. A denied resources/read
// answers [CodeDenied] where an unknown resource answers -32602, so a
// caller also learns that a resource it may not read exists. Route names,
// URIs and descriptions are therefore public; put nothing secret in them.
// Listings filtered by authorization, under which unknown and hidden look
// the same, are planned.
//
// # Exposure
//
// [Server.ListenAndServe] and [Server.Serve] fail closed: serving on an
// address that is not loopback while no authenticator is configured returns
// [ErrExposed] before any request is accepted; with one, it logs a warning.
// "Configured" means the catalog has one: [catalog.Config.Authenticator].
// ListenAndServe checks the address before it listens, so a refused address
// is never bound; Serve checks the listener it is given.
// The streamable HTTP handler keeps the SDK's DNS-rebinding protection (a
// loopback listener refuses non-loopback Host headers) unless
// [Options.HTTP] turns it off.
//
// What a client that anyone can reach could exhaust is bounded. An HTTP
// session idle for [Options.SessionTimeout] is closed, since most clients
// never DELETE theirs, and at most [Options.MaxSessions] are held: at the
// cap an initialize gets HTTP 503 ([ErrTooManySessions]) and live
// sessions are untouched. A POST without a session ID reserves a slot
// before the SDK sees it (one atomic add), the session its initialize
// creates claims the slot, and the slot comes back when that session
// ends. Beyond loopback, [CredentialAuto] has every HTTP request,
// initialize included, carry a token the authenticator accepts (401
// otherwise), so that strangers cannot open sessions at all. A
// cross-origin browser request gets 403 unless its origin is in
// [Options.AllowedOrigins] (Go's [http.CrossOriginProtection], applied to
// every method). Serve applies [Limits]: header, body, idle and per-write
// timeouts and a header size bound; the write timeout bounds each write,
// not a response, so that calls and standalone streams last as long as
// they need.
//
// Every cap (sessions, listen streams, subscriptions) is split between
// clients, so that no client takes what others need: a client holds at
// most [Options.ClientShare] of a cap (1/4: 250 of the 1,000 sessions),
// and the clients without a valid credential together at most
// [Options.AnonymousShare] of it (1/2) when an authenticator is
// configured. A client is the subject its bearer token authenticates as,
// or else its remote IP address; a session over stdio or in memory holds
// no share. A client over its share is refused as at the cap (503 with
// Retry-After for an initialize, [CodeOverloaded] for a listen or a
// subscribe, wrapping [ErrOverShare]), and nobody else is.
// [Server.RefusalStats] counts the refusals by cap and reason ("cap",
// "share", "session"); their WARN lines are logged at most once a second
// per cap, each with the count of those left out before it. The shares
// divide capacity, not CPU: a client's refused requests still cost their
// HTTP round trips, which a rate limit in front must bound.
//
// # Concurrency
//
// A Server is safe for concurrent use. Its request handlers run on the SDK's
// per-request goroutines and share the catalog, two atomic words of the
// notifier, and the table of sessions and calls in flight (one mutex, and
// one per session); a subscriptions/listen takes the mutex of the open
// listen streams when it opens and when it ends, and an initialize, a
// listen or a subscribe the mutex of its cap's shares. Its own goroutines
// are the notifier, the sender of resource updates and the re-check of
// subscriptions after a death, which [Server.Close] stops, and one per
// session that forgets the session when it ends (on a stateless server a call belongs to its HTTP request
// alone and registers no session). Serve and ListenAndServe run an http.Server until
// their context ends; ServeTransport and ServeStdio serve one session.
// With a Fleet, the internal server that answers forwarded calls has a
// notifier of its own, and each peer that calls are forwarded to holds one
// SDK client session (its goroutines are the SDK's), opened on the first
// forward, forgotten when an exchange with the peer fails, and closed by
// Close, which also closes the idle connections of the Server's own
// fleet client.
package mcpserve
