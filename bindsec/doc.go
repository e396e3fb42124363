// Package bindsec holds per-route security plans under the same owner
// discipline as the routes themselves (ADR-0068, "McpBindSecurity plans take
// the same discipline").
//
// # The threat
//
// A route's plan says what a request must present before the route body
// runs. Plans are registered and removed by the consumers that own the
// routes, and consumers can die without notice. Two things must never
// happen: a late stop of a dead owner removing the plan of the live consumer
// that replaced it, and a route body running without the checks its live
// owner registered. So a [Book] keeps each plan beside the [owner.Ref] of the
// consumer that registered it:
//
//   - [Book.RegisterPlan] keeps a live owner's plan ([ErrPlanHeld]) and
//     replaces a dead owner's.
//   - [Book.RegisterPlanTakeover] is for the consumer that won the route
//     entry: it re-asserts its own plan over whatever was there.
//   - [Book.UnregisterPlanOwned] removes a plan only for the owner that
//     registered it.
//   - [Book.PlanFor] ignores, and reclaims, a dead owner's plan.
//
// Package catalog needs no Book: each of its route entries carries its
// owner's plan, so a name and its plan are claimed, replaced and removed in
// one registry step, and it decides a request with [Plan.Check] on the plan
// of the entry the request resolved. A Book is the plan registry for a
// dispatcher whose routes live elsewhere, one plan per name apart from its
// route entry; package bench measures it against reference books.
//
// # Two modes for a missing plan
//
// In ADR-0068's reference system a route without a plan is open to
// unauthenticated callers. A Book denies such requests by default
// ([Deny], [ErrNoPlan]); a route that should be open registers
// Plan{Public: true}. [PassThrough] restores the reference behaviour for
// servers that rely on it. In either mode the owner discipline above holds,
// and a dispatcher that binds each request to one owner ([Book.GuardOwned])
// never runs a body under another owner's plan or under none.
//
// # Principals, plans and authenticators
//
// A [Principal] reaches route bodies, which are other consumers' code, so
// its roles are reachable only through methods ([Principal.HasRole],
// [Principal.Roles], [Principal.NumRoles]): every copy shares one array
// that nothing writes after [NewPrincipal], so a body cannot change what a
// token grants, and reading roles allocates nothing. A plan that
// contradicts itself (public, yet listing roles) is refused at
// registration with [ErrInvalidPlan]. [CheckAuthenticator] refuses an
// interface holding a nil pointer, and the guard calls the authenticator
// through [Authenticate], which turns a panic into [ErrAuthenticatorPanicked]:
// the request fails closed and the caller logs the *[AuthenticatorPanic].
//
// # Concurrency
//
// A Book is safe for concurrent use; it is a [shardreg.Registry] of plans
// with no cap of its own (plans exist only for routes, which are capped).
// [Book.PlanFor] and [Book.Guard] take no lock and PlanFor does not allocate.
// With no cap there is no sweep at full cap either: registrations sweep dead
// plans now and then instead, at a constant cost each on average, and
// [Book.Prune] sweeps on demand.
package bindsec
