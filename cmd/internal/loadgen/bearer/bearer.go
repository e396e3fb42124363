// Package bearer is how both loadgen worlds' MCP clients present a
// credential: the streamable HTTP transport carries it in the
// Authorization header of every request.
package bearer

import "net/http"

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
