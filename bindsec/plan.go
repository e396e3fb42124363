package bindsec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/livereg/livereg/internal/quote"
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
	// ErrInvalidPlan: a plan that contradicts itself, such as a public
	// plan that also lists roles. Registration refuses it and changes
	// nothing, so that a plan never silently means less than it says.
	ErrInvalidPlan = errors.New("bindsec: invalid plan")
)

// Plan says what a request must present before a route body may run. The
// zero Plan admits any authenticated principal.
type Plan struct {
	// Public marks the route explicitly open: no credential is needed.
	Public bool
	// Roles lists roles the principal must hold, every one of them.
	Roles []string
}

// Validate reports whether the plan means what it says: a public plan must
// list no roles, since it admits everyone and its roles would never be
// checked. It returns nil or an error wrapping ErrInvalidPlan.
func (p Plan) Validate() error {
	if p.Public && len(p.Roles) > 0 {
		return fmt.Errorf("%w: a public plan lists %d roles that would never be checked", ErrInvalidPlan, len(p.Roles))
	}
	return nil
}

// checkRegister is Validate for a registration of route's plan, wrapped as
// the Book's registrations wrap their errors.
func (p Plan) checkRegister(op, route string) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%s %s: %w", op, quote.Name(route), err)
	}
	return nil
}

// clone copies the plan so that a caller's later changes to its slice
// cannot reach a stored plan.
func (p Plan) clone() Plan {
	p.Roles = slices.Clone(p.Roles)
	return p
}

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
// missing role. A public plan admits everyone; an invalid plan (see
// Validate) admits no one.
func (p Plan) Authorize(pr Principal, now time.Time) error {
	return p.authorize(pr, func() time.Time { return now })
}

// authorize is Authorize that reads the clock only for a principal that
// can expire: most never do, and a clock read is a fair share of a guard.
func (p Plan) authorize(pr Principal, clock func() time.Time) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Public {
		return nil
	}
	if !pr.Expires().IsZero() && pr.Expired(clock()) {
		return ErrExpired
	}
	for _, role := range p.Roles {
		if !pr.HasRole(role) {
			return fmt.Errorf("%w: missing role %q", ErrForbidden, role)
		}
	}
	return nil
}

// Check decides a request against p, the plan its caller found bound to
// the route the request resolved: a public plan admits it with the zero
// Principal, without looking at the credential; otherwise credential is
// authenticated with a and the principal authorized, refused with
// ErrUnauthenticated, ErrForbidden or ErrExpired, or an
// *AuthenticatorPanic; an invalid plan (see Validate) admits no one. The
// returned principal may share its Roles slice with the authenticator: it
// is read-only. It is safe for concurrent use; it costs the
// authenticator's call and, for a principal that can expire, a clock read.
func (p Plan) Check(ctx context.Context, credential string, a Authenticator) (Principal, error) {
	if p.Public {
		// As Authorize: an invalid plan admits no one, even a public one.
		return Principal{}, p.Validate()
	}
	return enforce(ctx, p, credential, a, time.Now)
}

// enforce authenticates a credential and authorizes the principal against
// a plan that is not public. A panicking authenticator fails the request
// closed with an *AuthenticatorPanic (see Authenticate).
func enforce(ctx context.Context, p Plan, credential string, a Authenticator, clock func() time.Time) (Principal, error) {
	if credential == "" {
		return Principal{}, ErrUnauthenticated
	}
	pr, err := Authenticate(ctx, a, credential)
	if err != nil {
		return Principal{}, err
	}
	if err := p.authorize(pr, clock); err != nil {
		return Principal{}, err
	}
	return pr, nil
}
