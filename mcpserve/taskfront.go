package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/internal/quote"
)

// What the front judges of the tasks methods, which the SDK never sees
// (tasks.go). tasks/get, tasks/update and tasks/cancel get the checks of
// every other method: the front's own (the Origin, the credential
// policy) before they are told apart, and here those that the SDK's
// handler makes of the methods it serves and the fast path makes in its
// stead (the Host, the Content-Type, the Accept), with the SDK's answers.
// Then the caller's credential is authenticated again: a task is seen
// with the credential that started it (catalog/task.go), and a credential
// that the authenticator refuses now (revoked, or never valid) or whose
// principal has expired (bindsec.Principal.Expires) reads and changes
// nothing more, and is answered as an unauthenticated request is (401).
// The holder of a task forwarded to (fleettasks.go) judges it again, and
// its 401 is relayed as it is.
//
// A task started by a call counts against its caller's share of the task
// caps (catalog.WithTaskShare), the client that shares.go splits the
// front's other caps by: the principal its credential authenticates as,
// its address otherwise, and then the anonymous pool. A made-up
// credential is no principal: all of one address's count as one.

// clientCtxKey carries, from the front to a tools/call, its client
// (shares.go), for the fast path, whose requests have no number in
// requestHeader.
type clientCtxKey struct{}

// startsTasks reports whether r may be a call that starts a task: a
// 2026-07-28 tools/call. Only such a request carries its client
// (withClient), so that others cost nothing.
func startsTasks(r *http.Request) bool {
	return r.Header.Get(methodHeader) == methodCallTool && r.Header.Get(protocolHeader) == ProtocolStateless
}

// withClient returns r carrying its client cl: a shallow copy of r and a
// context, 3 allocations and about 490 bytes on each 2026-07-28 tools/call
// (BenchmarkTaskGet/call-trivial, 96 to 99 allocs/op: go test -run XXX
// -bench 'BenchmarkTaskGet$' -benchmem ./mcpserve).
func withClient(r *http.Request, cl client) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), clientCtxKey{}, cl))
}

// addrClient is the client of r by its remote address alone, anonymous:
// for a forwarded request, the replica that forwarded it.
func addrClient(r *http.Request) client {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return client{key: "addr:" + host, anonymous: true}
}

// taskShare is the share of the task caps the call req counts against,
// presenting cred. A call forwarded here is the forwarding replica's
// request: its principal is the forwarded credential's, if it
// authenticates, and an anonymous caller's share is the forwarding
// replica's address.
func (s *Server) taskShare(ctx context.Context, req mcp.Request, cred string) catalog.TaskShare {
	if isForwarded(req.GetExtra()) && s.http.auth && cred != "" {
		if pr, err := bindsec.Authenticate(ctx, s.cat.Authenticator(), cred); err == nil {
			return catalog.TaskShare{Key: subjectKey + pr.Subject()}
		}
	}
	cl, ok := ctx.Value(clientCtxKey{}).(client)
	if !ok {
		cl = s.requestClient(req)
	}
	if cl.key == "" {
		return catalog.TaskShare{} // no HTTP client: the credential's own
	}
	return catalog.TaskShare{Key: cl.key, Anonymous: cl.anonymous && s.http.auth}
}

// tasksFront makes the checks of a tasks request that the SDK's handler
// makes of others, and authenticates cred again; it reports whether the
// request may be served, having answered it otherwise. It costs the
// authenticator's call, where one is configured and cred is not empty.
func (s *Server) tasksFront(w http.ResponseWriter, r *http.Request, cred string) bool {
	switch {
	case !s.hostAllowed(r):
		http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %s", quote.Name(r.Host)), http.StatusForbidden)
		return false
	case !jsonContent(r.Header.Get("Content-Type")):
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return false
	case !acceptsBoth(r.Header.Values("Accept")):
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return false
	}
	switch _, err := s.stillValid(r.Context(), cred); {
	case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
		s.logAuthPanic(err, "tasks")
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return false
	case err != nil:
		refuseUnauthenticated(w)
		return false
	}
	return true
}

// stillValid authenticates again the credential cred that tasks were
// started with: nil when it authenticates and its principal has not
// expired, with when it will (zero: never), or when there is nothing to
// judge (no authenticator, or no credential: an anonymous caller's tasks
// are bound to no credential); an error wrapping
// bindsec.ErrUnauthenticated, bindsec.ErrExpired or
// bindsec.ErrAuthenticatorPanicked otherwise. It costs the
// authenticator's call.
func (s *Server) stillValid(ctx context.Context, cred string) (expires time.Time, err error) {
	if !s.http.auth || cred == "" {
		return time.Time{}, nil
	}
	pr, err := bindsec.Authenticate(ctx, s.cat.Authenticator(), cred)
	switch {
	case err != nil:
		return time.Time{}, err
	case !pr.Expires().IsZero() && pr.Expired(time.Now()):
		return time.Time{}, bindsec.ErrExpired
	}
	return pr.Expires(), nil
}

// listenExpiry is the timer of a task listen whose credential expires in
// d: its channel and its Stop. Tests replace it.
var listenExpiry = func(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
