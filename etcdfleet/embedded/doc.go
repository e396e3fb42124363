// Package embedded runs a single-node etcd inside the calling process, on
// loopback, for a fleet on one machine.
//
// livereg-mcp's -etcd-embedded mode starts one in production, and so do
// the runs and tests that need an etcd of their own (package etcdfleet's
// tests, the load generator's fleet world). The package is named for
// what it runs, not for tests, since a production mode is one of its
// callers: it holds the guarantees that mode needs (Config.Hardened,
// Etcd.EnableAuth), and a test asks for less, never for a different etcd.
//
// What a start gives:
//   - a client URL on a loopback IP, on a free port if the URL's port is 0,
//     over plain HTTP or, with Config.ClientTLS, over TLS;
//   - a peer URL on a loopback port the kernel picks: a single member never
//     dials it, but etcd listens on it;
//   - a lock on the data directory, held until Close, so that a second
//     start there fails at once (ErrLocked) instead of waiting forever for
//     etcd's own locks;
//   - a wait until the member serves, bounded by the caller's context and
//     Config.ReadyTimeout.
//
// Config.Hardened keeps the etcd to the fleet against other local
// processes and browsers (no CORS grant, loopback Host names only, mutual
// TLS on the peer port), and Etcd.EnableAuth turns etcd's auth on with one
// root user, sweeping what a stranger planted before it was on.
// Etcd.RootPassword keeps root's password, random, in the data directory,
// and Etcd.GrantPrefix makes the user a fleet's replicas log in as, who
// may read and write the fleet's prefix and nothing else.
//
// etcd's server is large: a program that imports this package links it,
// while one that imports only package etcdfleet links etcd's client.
package embedded
