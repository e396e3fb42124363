package bindsec_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

// A route guarded by a role: a request without credentials is denied, a
// good bearer token is granted, and when the owner dies and a replacement
// takes the route over, the dead owner's late stop cannot remove the
// replacement's plan.
func Example() {
	ctx := context.Background()
	book := bindsec.NewBook() // Deny: a route without a plan is closed
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-ops":   bindsec.NewPrincipal("ops-bot", "ops"),
		"tok-admin": bindsec.NewPrincipal("ada", "ops", "admin"),
	})

	a := owner.New() // consumer A starts
	if err := book.RegisterPlan("deploy", bindsec.Plan{Roles: []string{"ops"}}, a.Ref()); err != nil {
		panic(err)
	}
	_, err := book.Guard(ctx, "deploy", "", auth)
	fmt.Println("no credential, unauthenticated:", errors.Is(err, bindsec.ErrUnauthenticated))
	pr, err := book.Guard(ctx, "deploy", "tok-ops", auth)
	fmt.Println("good token:", pr.Subject(), err)
	_, err = book.Guard(ctx, "status", "tok-ops", auth)
	fmt.Println("route without a plan, denied:", errors.Is(err, bindsec.ErrNoPlan))

	a.Release() // A dies without a stop
	b := owner.New()
	defer b.Release()
	if err := book.RegisterPlan("deploy", bindsec.Plan{Roles: []string{"admin"}}, b.Ref()); err != nil {
		panic(err)
	}

	fmt.Println("A's late stop removed a plan:", book.UnregisterPlanOwned("deploy", a.Ref()))
	_, err = book.Guard(ctx, "deploy", "tok-ops", auth)
	fmt.Println("B's plan still enforced, forbidden:", errors.Is(err, bindsec.ErrForbidden))
	pr, err = book.Guard(ctx, "deploy", "tok-admin", auth)
	fmt.Println("admin token:", pr.Subject(), err)
	// Output:
	// no credential, unauthenticated: true
	// good token: ops-bot <nil>
	// route without a plan, denied: true
	// A's late stop removed a plan: false
	// B's plan still enforced, forbidden: true
	// admin token: ada <nil>
}

// The table keeps only digests of the tokens; the empty token is never
// valid, even when the map has one.
func ExampleNewStaticTokens() {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-ci": bindsec.NewPrincipal("ci", "deploy"),
		"":       bindsec.NewPrincipal("anyone"),
	})
	fmt.Println("tokens:", auth.Len())

	pr, err := auth.Authenticate(context.Background(), "tok-ci")
	fmt.Println(pr.Subject(), slices.Collect(pr.Roles()), err)
	_, err = auth.Authenticate(context.Background(), "tok-guess")
	fmt.Println(err)
	_, err = auth.Authenticate(context.Background(), "")
	fmt.Println(err)
	// Output:
	// tokens: 1
	// ci [deploy] <nil>
	// bindsec: unauthenticated
	// bindsec: unauthenticated
}
