package bindsec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Errors returned by this package; match them with errors.Is. Denial
// errors never contain a credential.
var (
	// ErrUnauthenticated: the request carried no credential, or one the
	// authenticator does not know, on a route whose plan needs one.
	ErrUnauthenticated = errors.New("bindsec: unauthenticated")
	// ErrForbidden: the principal lacks a role the plan requires.
	ErrForbidden = errors.New("bindsec: forbidden")
	// ErrExpired: the principal's Expires has passed.
	ErrExpired = errors.New("bindsec: credential expired")
	// ErrNoPlan: the route has no live plan and the book denies such
	// routes (the default, Deny).
	ErrNoPlan = errors.New("bindsec: no security plan for route")
	// ErrPlanHeld: RegisterPlan found the route's plan held by a live
	// owner and kept it. Nothing changed.
	ErrPlanHeld = errors.New("bindsec: plan held by a live owner")
	// ErrPlanOwner: GuardOwned found no live plan of the owner the request
	// was bound to: another owner's plan is in force (a restart is in
	// flight), or the bound owner's plan is gone (the owner died or is
	// stopping). The request is refused, never passed through.
	ErrPlanOwner = errors.New("bindsec: route's plan is not the bound owner's")
)

// Plan says what a request must present before a route body may run. The
// zero Plan admits any authenticated principal.
type Plan struct {
	// Public marks the route explicitly open: no credential is needed.
	Public bool
	// Roles lists roles the principal must hold, every one of them.
	Roles []string
}

// clone copies the plan so that a caller's later changes to its slice
// cannot reach a stored plan.
func (p Plan) clone() Plan {
	p.Roles = slices.Clone(p.Roles)
	return p
}

// Principal is an authenticated caller.
type Principal struct {
	Subject string
	Roles   []string
	// Expires is when the principal stops being valid, exclusive: it is
	// expired when now >= Expires. The zero time never expires.
	Expires time.Time
}

// Expired reports whether the principal has expired at now.
func (pr Principal) Expired(now time.Time) bool {
	return !pr.Expires.IsZero() && !now.Before(pr.Expires)
}

// HasRole reports whether the principal holds role.
func (pr Principal) HasRole(role string) bool { return slices.Contains(pr.Roles, role) }

// Authenticator turns a credential, a bearer token without its "Bearer "
// prefix, into a principal. The empty credential means none was presented.
// Implementations must be safe for concurrent use, must refuse unknown
// credentials with an error wrapping ErrUnauthenticated, and must never put
// the credential into an error or a log.
type Authenticator interface {
	Authenticate(ctx context.Context, credential string) (Principal, error)
}

// Authorize checks an authenticated principal against the plan at time now:
// ErrExpired for an expired principal, ErrForbidden naming the first
// missing role. A public plan admits everyone.
func (p Plan) Authorize(pr Principal, now time.Time) error {
	if p.Public {
		return nil
	}
	if pr.Expired(now) {
		return ErrExpired
	}
	for _, role := range p.Roles {
		if !pr.HasRole(role) {
			return fmt.Errorf("%w: missing role %q", ErrForbidden, role)
		}
	}
	return nil
}

// enforce authenticates a credential and authorizes the principal against
// a plan that is not public.
func enforce(ctx context.Context, p Plan, credential string, a Authenticator, now time.Time) (Principal, error) {
	if credential == "" || a == nil {
		return Principal{}, ErrUnauthenticated
	}
	pr, err := a.Authenticate(ctx, credential)
	if err != nil {
		if !errors.Is(err, ErrUnauthenticated) {
			err = fmt.Errorf("%w: %w", ErrUnauthenticated, err)
		}
		return Principal{}, err
	}
	if err := p.Authorize(pr, now); err != nil {
		return Principal{}, err
	}
	return pr, nil
}
