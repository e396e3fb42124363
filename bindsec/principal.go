package bindsec

import (
	"iter"
	"slices"
	"time"
)

// Principal is an authenticated caller. It is a small value, copied freely
// and safe to share between goroutines.
//
// Its roles are reachable only through methods. Every copy of a principal,
// and the authenticator's own table entry it came from, share one roles
// array that nothing can write after NewPrincipal made it: a route body that
// receives a Principal cannot change what the credential grants to any
// later request, and reading the roles costs no allocation per call.
type Principal struct {
	// Subject names the caller, for the route body and for logs.
	Subject string
	// Expires is when the principal stops being valid, exclusive: it is
	// expired when now >= Expires. The zero time never expires.
	Expires time.Time

	// roles is never written after NewPrincipal and never handed out.
	roles []string
}

// NewPrincipal returns a principal for subject holding roles. The roles are
// copied: later changes to the caller's slice do not reach the principal.
func NewPrincipal(subject string, roles ...string) Principal {
	return Principal{Subject: subject, roles: slices.Clone(roles)}
}

// WithExpires returns a copy of the principal that expires at t; it shares
// the roles, which are immutable.
func (pr Principal) WithExpires(t time.Time) Principal {
	pr.Expires = t
	return pr
}

// Expired reports whether the principal has expired at now.
func (pr Principal) Expired(now time.Time) bool {
	return !pr.Expires.IsZero() && !now.Before(pr.Expires)
}

// HasRole reports whether the principal holds role. It does not allocate.
func (pr Principal) HasRole(role string) bool { return slices.Contains(pr.roles, role) }

// Roles yields the principal's roles in the order NewPrincipal got them.
// Use slices.Collect for a copy of one's own.
func (pr Principal) Roles() iter.Seq[string] { return slices.Values(pr.roles) }

// NumRoles returns how many roles the principal holds.
func (pr Principal) NumRoles() int { return len(pr.roles) }
