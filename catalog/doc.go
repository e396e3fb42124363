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
// register the route's security plan, register the route entry (the winner
// of a contested name re-asserts its plan), start the route's bridge, and
// only then mark the route ready, so that it is listed and callable.
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
// by the same owner as the route entry, and hands the invocation over a
// bounded channel to the consumer's own goroutines. A request that resolved
// a route just before its owner died gets [ErrRouteGone] and the route body
// never runs; a request whose context ends while queued gets the context's
// error; a full queue gets [ErrOverloaded].
//
// No goroutine watches the clock: a consumer's bridge goroutines wait on
// its owner's Done channel and, when it closes, reclaim the route at once,
// so listings and [Catalog.Version] show a crashed consumer promptly.
package catalog
