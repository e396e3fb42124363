// Package catalog is what an MCP server author programs against: consumers
// start and stop tool and resource routes, and the server dispatches
// tools/call and resources/read through the catalog. It speaks MCP's
// vocabulary with small types of its own and has no SDK dependency; package
// mcpserve serves a Catalog through the official MCP Go SDK.
//
// # Consumers own their routes
//
// [Catalog.StartTool] and [Catalog.StartResource] start a consumer, in the
// order ADR-0068 gives: mint an owner token from the caller's context,
// register the route entry with the route's security plan in it (one step,
// so that a name never holds an entry without its plan, nor a plan of
// another owner than its entry's), attach the route's gate to the owner,
// and only then mark the route ready, so that it is listed and callable.
//
// The returned [*Consumer] is the owner. Keep it for as long as the route
// should serve, and call [Consumer.Stop] to end it. A consumer also ends,
// with its routes reclaimed and a restart free to take the name, when:
//
//   - the context passed to Start is cancelled (task abort);
//   - a route body panics (the consumer unwound, so it is dead);
//   - the *Consumer is dropped without Stop: the route ends at the next
//     garbage collection, like a context whose cancel function was lost.
//     This is a safety net, not a way to stop: it can take a while.
//
// # Dispatch
//
// A call resolves the route (lock-free), guards it with the plan registered
// by the same owner as the route entry, passes the route's gate, and runs
// the body on the calling goroutine, with the caller's context, the way the
// MCP Go SDK runs its own handlers. There is no hand-off, no queue and no
// per-route goroutine: a route serves as many calls at once as callers
// make, unless it was started [WithMaxConcurrent].
//
// The gate is where the owner's liveness is decided. A call announces
// itself on a striped counter, then reads the owner's liveness and whether
// the route is stopping; that read is the call's linearization point, the
// instant its body is admitted. Both ends of a consumer look at the
// announcements after raising their own flag, so neither can miss a call:
//
//   - a death waits out the admissions in progress before it completes
//     (the gate is an [owner.Holder]): a body is admitted only while its
//     owner lives, and every body admitted was admitted before the death
//     completed. A call that loses to the death gets [ErrRouteGone] and its
//     body never runs, whenever the call began;
//   - [Consumer.Stop] closes the gate, then waits for the admitted bodies
//     to return: once it returns nil, no body runs or will start.
//
// A body's context is its caller's; it does not end when the owner dies,
// since that would cost every call an allocation. A body learns of its
// owner's death from [Call.Owner]. A panicking body kills its consumer;
// the caller gets [ErrRoutePanicked] (which also matches the panic's
// value when it is an error) and the process goes on, while
// Config.Logger gets the panic's value and stack at the consumer's death.
// A body that ends its goroutine with runtime.Goexit is an unwind too: its
// consumer dies, its slot is released, and a task of it fails with
// [ErrRouteExited]; a call's caller cannot get an error, since the Goexit
// unwinds its goroutine as well (unwind.go).
//
// No goroutine watches the clock or the owner: a death runs the route's
// reclaim once, in a goroutine of its own ([owner.Ref.AfterDeath]), so
// listings and [Catalog.Version] show a crashed consumer promptly and an
// idle consumer costs no goroutine at all.
//
// Each [Kind] of route is a namespace of its own with a [View] of it:
// [Catalog.Tools], [Catalog.Resources], [Catalog.Prompts] and
// [Catalog.Templates] list, page and version one kind each.
//
// # Schemas, typed tools, and talking back
//
// StartTool compiles a tool's input and output schemas once, with
// github.com/google/jsonschema-go; a call's arguments are checked before
// its body runs (ErrInvalidArguments) and its result after
// (ErrInvalidResult). No schema reference is ever fetched.
// [StartTypedTool] starts a tool in one call, its schemas inferred from Go
// types, and decodes and encodes for the body.
// A body reports progress and log messages to its caller through
// [Call.ReportProgress] and [Call.Log]; the caller supplies a [Client]
// ([WithClient]), as package mcpserve does for MCP clients.
//
// # Prompts, resource templates, subscriptions and completions
//
// [Catalog.StartPrompt] and [Catalog.StartResourceTemplate] start the two
// other kinds of route an MCP server offers, each a namespace of its own
// with its own cap (Config.MaxPrompts, Config.MaxTemplates; negative
// turns a kind off) and the same start order, duplicate guard, plans,
// gate and reclaim as tools. A prompt with two arguments of one name is
// refused (ErrInvalidRoute); a template that does not parse as RFC 6570
// (github.com/yosida95/uritemplate/v3), or whose scheme is not literal, is
// refused (ErrInvalidName). Two templates that differ only in their
// variable names match the same URIs: the second is ErrDuplicate while
// the first's owner lives.
//
// [Catalog.ReadResource] reads a URI the way resources/read does: a live fixed
// resource wins; otherwise the live templates that match it compete, and
// the one with the most literal text reads it, ties going to the smaller
// template string, so the winner never depends on timing. The reader gets
// the matched variables percent-decoded in [Read.Vars] and as sent in
// [Read.RawVars]; a variable that decodes to a NUL byte or invalid UTF-8
// is refused ([ErrInvalidArguments]) unless the template sets
// AllowRawBytes. A URI longer than [Config.MaxURIBytes] (8 KiB by
// default) is refused ([ErrInvalidArguments]) before any lookup: matching costs
// about 3 µs per byte of URI. A template whose owner died never
// matches, and a read that chose it just before the death is refused at
// its gate (ErrRouteGone). Templates are indexed by the literal text
// before their first expression, and a quick check of their other literal
// text spares most candidates the matcher: a read looks at a few templates,
// not all of them.
//
// A resource consumer publishes a change with [Consumer.Updated]; a server
// listens with [Catalog.OnResourceUpdated], and [Catalog.ResourceOwner]
// tells it which owner serves a URI now. A prompt or template started
// [WithCompleter] answers [Catalog.Complete] through its plan and gate; the
// completer dies with its consumer.
package catalog
