// Package bearer is how both loadgen worlds' routes and MCP clients use
// credentials: the plan a route registers, and the transport that carries
// a client's token in the Authorization header of every request.
package bearer

import (
	"net/http"

	"github.com/livereg/livereg/bindsec"
)

// RoleCall is the role a route's plan requires unless the route is
// public; each world's valid token carries it.
const RoleCall = "loadgen.call"

// Plan is what a route registers: public, or needing RoleCall.
func Plan(public bool) bindsec.Plan {
	if public {
		return bindsec.Plan{Public: true}
	}
	return bindsec.Plan{Roles: []string{RoleCall}}
}

// Transport adds one fixed bearer token to every request it sends through
// Next; an empty Token adds nothing, for the clients that must present no
// credential. Safe for concurrent use when Next is: it clones each request
// rather than changing the caller's.
type Transport struct {
	Next  http.RoundTripper
	Token string
}

// RoundTrip sends r through Next, with the token if there is one.
func (b Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.Token == "" {
		return b.Next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Next.RoundTrip(r)
}
