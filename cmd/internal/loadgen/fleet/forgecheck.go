package fleet

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/mcpserve"
)

// listed is one entry of a tool listing, as any of the listings gives it.
type listed struct{ name, title, desc string }

// forged reports whether a listing entry is one the forger made up or
// altered.
func (l listed) forged() bool {
	return strings.HasPrefix(l.name, forgedPrefix) || strings.Contains(l.title, forgeMarker) || strings.Contains(l.desc, forgeMarker)
}

// forgeChecker judges what the forger sees (invariant 8).
type forgeChecker struct {
	t       *tally
	trapURL string
}

// listing judges one listing: no entry of it is forged. A listing that
// shows forged entries is one violation, however many it shows.
func (c forgeChecker) listing(where string, tools []listed) {
	c.t.Check(InvForgedListed, 1)
	var bad []string
	for _, l := range tools {
		if l.forged() {
			bad = append(bad, fmt.Sprintf("%q (title %q)", l.name, l.title))
		}
	}
	if len(bad) > 0 {
		c.t.Violate(InvForgedListed, "%s lists forged records (%d): %s", where, len(bad), strings.Join(bad[:min(len(bad), 3)], ", "))
	}
}

// listFailed judges a listing that failed on a replica that is up: only a
// record no replica wrote (a descriptor that is no schema) breaks one.
func (c forgeChecker) listFailed(where string, err error) {
	c.t.Check(InvForgedListed, 1)
	c.t.Violate(InvForgedListed, "%s failed while forged records were in etcd: %v", where, err)
}

// located judges one replica's Peer for a forged name: a name the forger
// made up must not be located at all, and no name at the trap.
func (c forgeChecker) located(via, name, endpoint string, ok, madeUp bool) {
	c.t.Check(InvForgedFollowed, 1)
	switch {
	case ok && endpoint == c.trapURL:
		c.t.Violate(InvForgedFollowed, "%s locates %s at the trap %s, a forged record's endpoint", via, name, endpoint)
	case ok && madeUp:
		c.t.Violate(InvForgedFollowed, "%s locates %s, a name only forged records hold, at %s", via, name, endpoint)
	}
}

// called counts a call for a forged name: one that a replica following the
// forged record forwards to the trap.
func (c forgeChecker) called() { c.t.Check(InvForgedFollowed, 1) }

// trapHit judges a request that reached the trap: every one is a forged
// record followed.
func (c forgeChecker) trapHit(h trapHit) {
	c.t.Violate(InvForgedFollowed, "the trap, a forged record's endpoint, received %s %s (fleet token: %v, a caller's credential: %v, headers %s)",
		h.method, h.path, h.fleetToken, h.callerCred, strings.Join(h.headers, " "))
}

// trap is the loopback HTTP server that forged records point at. A
// correct fleet sends it nothing; it counts every request, and notes
// which credentials came with it, never their values.
type trap struct {
	url    string // its fleet endpoint, as a forged record gives it
	token  string // the run's fleet token
	ln     net.Listener
	srv    *http.Server
	mcp    http.Handler
	served chan struct{} // closed once it no longer serves
	hit    func(trapHit)

	hits, fleetToken, callerCred atomic.Int64
}

// trapHit is one request the trap received.
type trapHit struct {
	method, path           string
	headers                []string // the header names
	fleetToken, callerCred bool
}

// newTrap listens on a loopback port, and serves once start is called.
func newTrap(token string) (*trap, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &trap{url: "http://" + ln.Addr().String() + mcpserve.DefaultFleetPath, token: token, ln: ln, served: make(chan struct{})}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 5 * time.Second}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fleetload-trap", Version: "dev"}, &mcp.ServerOptions{Logger: discard})
	t.mcp = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, Logger: discard})
	return t, nil
}

// start serves, calling hit for every request.
func (t *trap) start(hit func(trapHit)) {
	t.hit = hit
	go func() { defer close(t.served); _ = t.srv.Serve(t.ln) }()
}

func (t *trap) serve(w http.ResponseWriter, r *http.Request) {
	h := trapHit{method: r.Method, path: r.URL.Path,
		fleetToken: t.token != "" && strings.Contains(r.Header.Get("Authorization"), t.token),
		callerCred: r.Header.Get("Livereg-Fleet-Caller") != ""}
	for name := range r.Header {
		h.headers = append(h.headers, name)
	}
	slices.Sort(h.headers)
	t.hits.Add(1)
	if h.fleetToken {
		t.fleetToken.Add(1)
	}
	if h.callerCred {
		t.callerCred.Add(1)
	}
	t.hit(h)
	// It answers as an MCP server with no tools would, so that a replica
	// that follows a forged record goes on past the session's opening to
	// the call itself, and shows what it sends with one.
	t.mcp.ServeHTTP(w, r)
}

// close stops the trap and waits for it.
func (t *trap) close() {
	if t.hit == nil {
		_ = t.ln.Close()
		return
	}
	_ = t.srv.Close()
	<-t.served
}
