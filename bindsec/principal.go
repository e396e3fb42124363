package bindsec

import (
	"iter"
	"slices"
	"time"
)

// Principal is an authenticated caller: a one-word handle to an identity
// that nothing can change once made. It is copied freely, safe to share
// between goroutines, and costs a route body nothing to receive: an
// authenticator hands out the principal of its table entry itself, not a
// copy. The zero Principal is nobody: no subject, no roles, never expires.
//
// Everything is reachable only through methods, so a route body that gets
// a Principal cannot change what the credential grants to any later
// request, however it misbehaves.
type Principal struct {
	id *identity
}

// identity is never written after NewPrincipal or WithExpires made it.
type identity struct {
	subject string
	expires time.Time
	roles   []string
}

// NewPrincipal returns a principal for subject holding roles, which never
// expires. The roles are copied: later changes to the caller's slice do not
// reach the principal.
func NewPrincipal(subject string, roles ...string) Principal {
	return Principal{&identity{subject: subject, roles: slices.Clone(roles)}}
}

// WithExpires returns a principal like pr that expires at t, exclusive: it
// is expired when now >= t. The zero time never expires. pr is unchanged.
func (pr Principal) WithExpires(t time.Time) Principal {
	id := identity{}
	if pr.id != nil {
		id = *pr.id
	}
	id.expires = t
	return Principal{&id}
}

// Subject names the caller, for the route body and for logs.
func (pr Principal) Subject() string {
	if pr.id == nil {
		return ""
	}
	return pr.id.subject
}

// Expires returns when the principal stops being valid; the zero time for
// one that never does.
func (pr Principal) Expires() time.Time {
	if pr.id == nil {
		return time.Time{}
	}
	return pr.id.expires
}

// Expired reports whether the principal has expired at now.
func (pr Principal) Expired(now time.Time) bool {
	return pr.id != nil && !pr.id.expires.IsZero() && !now.Before(pr.id.expires)
}

// IsZero reports whether pr is the zero Principal, which public routes and
// pass-through get.
func (pr Principal) IsZero() bool { return pr.id == nil }

// HasRole reports whether the principal holds role. It does not allocate.
func (pr Principal) HasRole(role string) bool {
	return pr.id != nil && slices.Contains(pr.id.roles, role)
}

// Roles yields the principal's roles in the order NewPrincipal got them.
// Use slices.Collect for a copy of one's own.
func (pr Principal) Roles() iter.Seq[string] {
	var roles []string
	if pr.id != nil {
		roles = pr.id.roles
	}
	return slices.Values(roles)
}

// NumRoles returns how many roles the principal holds.
func (pr Principal) NumRoles() int {
	if pr.id == nil {
		return 0
	}
	return len(pr.id.roles)
}
