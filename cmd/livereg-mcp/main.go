// Command livereg-mcp is an MCP server whose tools and resources live in a
// livereg catalog: streamable HTTP at /mcp (default 127.0.0.1:8931) or stdio.
//
// It starts a few demo consumers (the tools echo, stats and whoami, and the
// resource livereg://about), and a demo of what livereg is for: the public
// tool fortune, owned by a consumer that the admin-only tools demo_crash
// (by stop, cancel, panic or drop) and demo_restart end and start again,
// so that a client sees it leave the listing, receives list_changed, and
// sees the restart take the name over; ops_report needs the role ops.
// With -conformance it also starts the fixture tools and resources that
// the official MCP conformance suite calls.
//
// Usage:
//
//	livereg-mcp [-addr host:port] [-path /mcp] [-stdio] [-stateless]
//	            [-max-listen-streams n] [-conformance]
//	            [-tokens-file file | -tokens spec] [-url-file file]
//	            [-metrics host:port] [-log-level level] [-log-json]
//	            [-shutdown-timeout d] [-list-ttl d]
//	            [-etcd URL[,URL...] [-etcd-ca file] [-etcd-cert file -etcd-key file]
//	             [-etcd-user name [-etcd-password-file file]]
//	             | -etcd-embedded DIR [-etcd-listen URL]]
//	            [-advertise URL] [-fleet-token token] [-fleet-ttl d]
//	            [-fleet-prefix /prefix] [-replica name] [-fleet-peers list]
//	            [-tls-cert file -tls-key file] [-fleet-ca file] [-fleet-insecure-network]
//
// For a wildcard -addr (0.0.0.0, [::]) it logs, and writes to -url-file,
// the loopback URL, which a client on the machine can use, and logs the
// machine's addresses. -metrics serves Prometheus metrics at /metrics.
//
// -stateless serves streamable HTTP without sessions, which the MCP
// revision 2026-07-28 needs: its clients discover the server with
// server/discover, send the protocol version with every request, and
// receive list_changed over subscriptions/listen (at most
// -max-listen-streams such streams at once). Clients of earlier revisions
// are served too, but without list_changed: they must list again. Without
// -stateless, a 2026-07-28 client falls back to the initialize handshake
// of 2025-11-25 and gets list_changed on its session's standalone stream.
//
// Bearer tokens come from -tokens-file (a file only its owner may read or
// write; it is refused otherwise), from -tokens, or, when neither is set,
// from the LIVEREG_MCP_TOKENS environment variable. Prefer the file or the
// variable: a command line, -tokens included, is visible to every user of
// the machine in ps. The spec is a list of TOKEN@SUBJECT[:ROLE[+ROLE...]]
// entries separated by commas or newlines; a file may hold '#' comment
// lines. A TOKEN is an RFC 6750 bearer token of at least 16 bytes (base64
// padding included), which never contains '@', so the first '@' of an
// entry ends the token. For example
//
//	LIVEREG_MCP_TOKENS='0bc3f1e7a9d24c58b6e2@alice:admin+ops,dG9rZW4tZm9yLWJvYg==@bob' livereg-mcp
//
// Errors about the spec or the command line never quote what was given,
// since it may be a token.
//
// With -etcd (an etcd cluster's client URLs) or -etcd-embedded (a
// directory, where it starts a single-node etcd listening on -etcd-listen,
// loopback only, for a fleet on one machine) the server is one replica of
// a fleet (package etcdfleet): route names are one namespace across the
// replicas, every replica lists every replica's routes, and a call for a
// route another replica serves is forwarded to it, at the URL it
// advertises (-advertise; by default the address it listens on, path
// /fleet), authenticated by the fleet token that every replica shares:
// $LIVEREG_FLEET_TOKEN, or -fleet-token, which ps shows. Every replica
// starts the same demo consumers; one replica wins each name, and the
// others take a name over when it is free again. Each replica also serves
// replica_NAME (-replica NAME), which says where a call ran.
//
// The embedded etcd runs with auth on: its one user, root, has a password
// derived from the fleet token, with which every replica that gives no
// -etcd-user logs in. It grants no CORS origin and serves only loopback
// Host names. For an etcd of one's own, -etcd-ca, -etcd-cert and -etcd-key
// set TLS, and -etcd-user an etcd user, whose password comes from
// $LIVEREG_ETCD_PASSWORD or -etcd-password-file, never from a flag.
//
// The fleet token also signs every record a replica writes in etcd, and a
// replica believes no other (package etcdfleet's "What a replica
// trusts"): a record that is not signed, or whose endpoint is not /fleet
// on a host -fleet-peers allows (any by default; loopback only with
// -etcd-embedded), is neither listed nor forwarded to. While the fleet
// rotates its token, $LIVEREG_FLEET_TOKEN_PREVIOUS (comma-separated)
// holds the tokens still accepted, never sent.
//
// With -tls-cert and -tls-key the one listener, the MCP endpoint and the
// fleet endpoint both, speaks TLS only (1.2 at least), and loads the pair
// again when its files change (looked at no more than once a second) or
// on SIGHUP; a new pair that does not load is logged and the old one
// served. A replica then advertises https, and its hop trusts the CAs of
// -fleet-ca (default: the system's roots). An http -advertise URL on a
// host other than loopback is refused unless -fleet-insecure-network says
// the network between the replicas is trusted.
//
// Without tokens only public routes answer and the server refuses to listen
// on a non-loopback address; with tokens, a non-loopback listener answers
// only requests that carry one, initialize included. SIGINT or SIGTERM
// shuts it down gracefully, and the process then exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is reported to clients as serverInfo.version.
const version = "0.1.0"

func main() {
	cfg, err := parseArgs(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "livereg-mcp:", err)
		os.Exit(2)
	}
	setGC(cfg.gcConfig, os.Getenv)
	// Logs go to stderr: with -stdio, stdout carries the protocol.
	log := newLogger(cfg.logConfig, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("livereg-mcp failed", "err", err)
		stop()
		os.Exit(1)
	}
}
