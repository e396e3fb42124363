// This file holds who may reach a Server: the exposure check of a listen
// address, the credential policy of HTTP requests and the Origin check.

package mcpserve

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/livereg/livereg/bindsec"
)

// CredentialPolicy says which HTTP requests must carry a bearer token that
// the catalog's authenticator accepts before the SDK sees them.
type CredentialPolicy int

const (
	// CredentialAuto, the zero value, requires a valid credential on every
	// HTTP request, initialize included, when the server is reached beyond
	// loopback: Serve was given a listener that is not loopback, or the
	// request arrived on a connection whose local address is not loopback.
	// On loopback only the routes' plans ask for credentials. Without an
	// authenticator nothing is required (Serve refuses to listen beyond
	// loopback then).
	CredentialAuto CredentialPolicy = iota
	// CredentialAlways requires a valid credential on every HTTP request.
	CredentialAlways
	// CredentialPerRoute never requires one at the HTTP layer: anyone who
	// reaches the server may open sessions, and each route's plan decides.
	CredentialPerRoute
)

// needsCredential reports whether r must carry a valid credential under
// the server's policy. exposed is set by Serve for a listener beyond
// loopback.
func (s *Server) needsCredential(r *http.Request, exposed bool) bool {
	if !s.http.auth {
		return false
	}
	switch s.http.policy {
	case CredentialAlways:
		return true
	case CredentialPerRoute:
		return false
	}
	if exposed {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && !isLocal(local)
}

// refuseUnauthenticated answers a request without a valid credential
// where one is required (RFC 6750's 401 with a Bearer challenge).
func refuseUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
	http.Error(w, "Unauthorized: this server requires a valid bearer token on every request", http.StatusUnauthorized)
}

// crossOrigin builds the Origin check: Go's http.CrossOriginProtection,
// which trusts requests without browser headers (Sec-Fetch-Site, Origin),
// same-origin ones, and the origins listed.
func crossOrigin(allowed []string) (*http.CrossOriginProtection, error) {
	cop := http.NewCrossOriginProtection()
	for _, o := range allowed {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: allowed origin: %v", ErrInvalidOptions, err)
		}
	}
	return cop, nil
}

// checkOrigin applies the Origin check to every method. The MCP transport
// asks servers to validate Origin on all incoming connections, and
// CrossOriginProtection lets safe methods through, so GET (the standalone
// stream) and DELETE are checked as if they were POSTs.
func (s *Server) checkOrigin(r *http.Request) error {
	if r.Method == http.MethodPost {
		return s.http.origins.Check(r)
	}
	probe := r.Clone(r.Context())
	probe.Method = http.MethodPost
	return s.http.origins.Check(probe)
}

// CheckExposure reports whether Serve would accept a listener bound to
// addr for a catalog with the authenticator auth: nil for a loopback or
// Unix-socket address, or for any address when auth is configured (a nil
// pointer in an interface does not count, as bindsec.Configured says);
// otherwise an error wrapping ErrExposed. It is a pure function of its
// arguments, so a program can check an address before it has a Server.
func CheckExposure(addr net.Addr, auth bindsec.Authenticator) error {
	return checkExposure(addr, bindsec.Configured(auth))
}

func checkExposure(addr net.Addr, auth bool) error {
	if isLocal(addr) || auth {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrExposed, addr)
}

// CheckListenAddress is CheckExposure for a TCP address that is not bound
// yet ("host:port"), so that a refused address is never listened on. An
// empty host means every interface. A host name counts as loopback only
// when every address it resolves to is loopback (a DNS lookup, bounded by
// ctx). It returns an error wrapping ErrExposed for an exposed address
// without an authenticator, and the parse error for a malformed one.
func CheckListenAddress(ctx context.Context, addr string, auth bindsec.Authenticator) error {
	return checkListenAddress(ctx, addr, bindsec.Configured(auth))
}

func checkListenAddress(ctx context.Context, addr string, auth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mcpserve: listen address: %w", err)
	}
	if auth || hostIsLoopback(ctx, host) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrExposed, addr)
}

func hostIsLoopback(ctx context.Context, host string) bool {
	if host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// isLocal reports whether a listener address can only be reached from this
// machine: a loopback IP, or a Unix socket.
func isLocal(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
