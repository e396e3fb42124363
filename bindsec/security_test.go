package bindsec_test

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
)

// ---- Principal: roles cannot be changed by whoever holds a copy -----------

// mutableKinds are the kinds through which a holder of a copy could write
// into memory the copy shares with the authenticator's table.
var mutableKinds = []reflect.Kind{reflect.Slice, reflect.Map, reflect.Pointer, reflect.UnsafePointer, reflect.Interface, reflect.Chan, reflect.Func}

// A route body receives a Principal by value. Nothing it can reach through
// that value may alias the authenticator's table: no exported field and no
// method result of a kind that can be written through.
func TestPrincipalExposesNothingWritable(t *testing.T) {
	typ := reflect.TypeFor[bindsec.Principal]()
	for f := range typ.Fields() {
		if f.IsExported() && slices.Contains(mutableKinds, f.Type.Kind()) {
			t.Errorf("Principal.%s is a %s: a holder could change what the token grants", f.Name, f.Type.Kind())
		}
	}
	// An iterator of strings hands out copies of immutable values.
	seq := reflect.TypeFor[iter.Seq[string]]()
	for m := range typ.Methods() {
		for out := range m.Type.Outs() {
			if out != seq && slices.Contains(mutableKinds, out.Kind()) {
				t.Errorf("Principal.%s returns a %s: a holder could change what the token grants", m.Name, out)
			}
		}
	}
}

// The attack of the review: a body that rewrites the roles it was given
// (here: everything it can collect and edit) must not raise the token.
func TestBodyCannotRaiseTokenRoles(t *testing.T) {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{tokReader: bindsec.NewPrincipal("rex", "viewer")})
	pr, err := auth.Authenticate(context.Background(), tokReader)
	if err != nil {
		t.Fatal(err)
	}

	roles := slices.Collect(pr.Roles())
	roles[0] = "admin"
	for i := range roles {
		roles[i] = strings.ToUpper(roles[i])
	}
	expired := pr.WithExpires(time.Unix(1, 0))
	if !expired.Expired(time.Now()) {
		t.Fatalf("expired.Expired(time.Now()) is false")
	}

	again, err := auth.Authenticate(context.Background(), tokReader)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Subject(); got != "rex" {
		t.Errorf("again.Subject() = %q, want \"rex\"", got)
	}
	if got, want := slices.Collect(again.Roles()), ([]string{"viewer"}); !reflect.DeepEqual(got, want) {
		t.Errorf("slices.Collect(again.Roles()) = %v, want %v", got, want)
	}
	if again.HasRole("admin") {
		t.Errorf("again.HasRole(\"admin\") is true")
	}
	if !again.Expires().IsZero() {
		t.Errorf("again.Expires().IsZero() is false")
	}
	if err := (bindsec.Plan{Roles: []string{"viewer"}}.Authorize(again, time.Now())); err != nil {
		t.Error(err)
	}
	if err := (bindsec.Plan{Roles: []string{"admin"}}.Authorize(again, time.Now())); !errors.Is(err, bindsec.ErrForbidden) {
		t.Errorf("err = %v, want bindsec.ErrForbidden", err)
	}
}

// NewPrincipal copies its roles: the caller's slice is not the principal's.
func TestNewPrincipalCopiesRoles(t *testing.T) {
	roles := []string{"viewer"}
	pr := bindsec.NewPrincipal("rex", roles...)
	roles[0] = "admin"
	if !pr.HasRole("viewer") {
		t.Errorf("pr.HasRole(\"viewer\") is false")
	}
	if pr.HasRole("admin") {
		t.Errorf("pr.HasRole(\"admin\") is true")
	}
	if got := pr.NumRoles(); got != 1 {
		t.Errorf("pr.NumRoles() = %v, want 1", got)
	}
}

// Reading the roles on the dispatch path costs nothing per call.
func TestPrincipalRolesDoNotAllocate(t *testing.T) {
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{tokAdmin: bindsec.NewPrincipal("ada", "admin", "ops")})
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		pr, err := auth.Authenticate(context.Background(), tokAdmin)
		if err != nil || !pr.HasRole("ops") {
			panic("the admin token lost its roles")
		}
		for r := range pr.Roles() {
			n += len(r)
		}
		n += pr.NumRoles()
	})
	if allocs != 0 {
		t.Errorf("authenticating and reading the roles allocated: allocs = %v, want 0", allocs)
	}
	if n <= 0 {
		t.Errorf("n = %v, want > 0", n)
	}

	// The whole guard of a call, through the panic-recovering Authenticate.
	b := bindsec.NewBook()
	tok := live(t)
	if err := b.RegisterPlan("r", bindsec.Plan{Roles: []string{"ops"}}, tok.Ref()); err != nil {
		t.Fatal(err)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := b.GuardOwned(context.Background(), "r", tok.Ref(), tokAdmin, auth); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Errorf("an admitted guard allocated: allocs = %v, want 0", allocs)
	}
}

// ---- Plan validation ----------------------------------------------------

// A public plan that lists roles is refused by both registrations, and
// nothing changes: neither reading ("public" or "needs the roles") is
// chosen silently.
func TestPublicPlanWithRolesRefused(t *testing.T) {
	bad := bindsec.Plan{Public: true, Roles: []string{"admin"}}
	if err := bad.Validate(); !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Fatalf("err = %v, want bindsec.ErrInvalidPlan", err)
	}
	if err := (bindsec.Plan{Public: true}.Validate()); err != nil {
		t.Fatal(err)
	}
	if err := (bindsec.Plan{Roles: []string{"admin"}}.Validate()); err != nil {
		t.Fatal(err)
	}

	b := bindsec.NewBook()
	err := b.RegisterPlan("tool", bad, live(t).Ref())
	if !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Fatalf("err = %v, want bindsec.ErrInvalidPlan", err)
	}
	_, ok := b.PlanFor("tool")
	if ok {
		t.Errorf("a refused plan was stored: ok is true")
	}

	incumbent := live(t)
	if err := b.RegisterPlan("tool", bindsec.Plan{Roles: []string{"ops"}}, incumbent.Ref()); err != nil {
		t.Fatal(err)
	}
	err = b.RegisterPlanTakeover("tool", bad, incumbent.Ref())
	if !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Fatalf("err = %v, want bindsec.ErrInvalidPlan", err)
	}
	p, ok := b.PlanFor("tool")
	if !ok {
		t.Fatalf("b.PlanFor(\"tool\") found nothing")
	}
	if want := (bindsec.Plan{Roles: []string{"ops"}}); !reflect.DeepEqual(p, want) {
		t.Errorf("a refused takeover changed the plan: p = %v, want %v", p, want)
	}
}

// ---- Authenticators that are nil or panic -------------------------------

func TestCheckAuthenticator(t *testing.T) {
	var typedNil *bindsec.StaticTokens
	if err := bindsec.CheckAuthenticator(nil); err != nil {
		t.Errorf("no authenticator is a valid configuration: %v", err)
	}
	if err := bindsec.CheckAuthenticator(bindsec.NewStaticTokens(nil)); err != nil {
		t.Error(err)
	}
	err := bindsec.CheckAuthenticator(typedNil)
	if !errors.Is(err, bindsec.ErrInvalidAuthenticator) {
		t.Errorf("err = %v, want bindsec.ErrInvalidAuthenticator", err)
	}
	var fn authFunc
	if err := bindsec.CheckAuthenticator(fn); !errors.Is(err, bindsec.ErrInvalidAuthenticator) {
		t.Errorf("err = %v, want bindsec.ErrInvalidAuthenticator", err)
	}

	if bindsec.Configured(nil) {
		t.Errorf("bindsec.Configured(nil) is true")
	}
	if bindsec.Configured(typedNil) {
		t.Errorf("a typed nil counted as configured: bindsec.Configured(typedNil) is true")
	}
	if !bindsec.Configured(bindsec.NewStaticTokens(nil)) {
		t.Errorf("bindsec.Configured(bindsec.NewStaticTokens(nil)) is false")
	}
	if !bindsec.Configured(valueAuth{}) {
		t.Errorf("bindsec.Configured(valueAuth{}) is false")
	}
}

// A typed-nil authenticator on the guard path refuses, never crashes.
func TestTypedNilAuthenticatorRefuses(t *testing.T) {
	var typedNil *bindsec.StaticTokens
	b := bindsec.NewBook()
	if err := b.RegisterPlan("tool", bindsec.Plan{}, live(t).Ref()); err != nil {
		t.Fatal(err)
	}
	_, err := b.Guard(context.Background(), "tool", tokAdmin, typedNil)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
	}
	_, err = typedNil.Authenticate(context.Background(), tokAdmin)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
	}
	if got := typedNil.Len(); got != 0 {
		t.Errorf("typedNil.Len() = %v, want 0", got)
	}
}

// A panicking authenticator fails the request closed with an internal
// error that carries the panic for the server's log, and whose text never
// repeats the panic value (it may quote the credential).
func TestPanickingAuthenticatorFailsClosed(t *testing.T) {
	boom := authFunc(func(_ context.Context, cred string) (bindsec.Principal, error) {
		panic("cannot parse token " + cred)
	})
	b := bindsec.NewBook()
	tok := live(t)
	if err := b.RegisterPlan("tool", bindsec.Plan{}, tok.Ref()); err != nil {
		t.Fatal(err)
	}
	for name, guard := range map[string]func() (bindsec.Principal, error){
		"Guard": func() (bindsec.Principal, error) { return b.Guard(context.Background(), "tool", tokAdmin, boom) },
		"GuardOwned": func() (bindsec.Principal, error) {
			return b.GuardOwned(context.Background(), "tool", tok.Ref(), tokAdmin, boom)
		},
	} {
		t.Run(name, func(t *testing.T) {
			pr, err := guard()
			if !errors.Is(err, bindsec.ErrAuthenticatorPanicked) {
				t.Fatalf("err = %v, want bindsec.ErrAuthenticatorPanicked", err)
			}
			if errors.Is(err, bindsec.ErrUnauthenticated) {
				t.Errorf("a panic is an internal error, not a denial: err = %v, want one that is not bindsec.ErrUnauthenticated", err)
			}
			var p *bindsec.AuthenticatorPanic
			if !errors.As(err, &p) {
				t.Fatalf("errors.As(err, &p) is false")
			}
			if !reflect.DeepEqual(p.Value, "cannot parse token "+tokAdmin) {
				t.Errorf("p.Value = %v, want \"cannot parse token \"+tokAdmin", p.Value)
			}
			if len(p.Stack) == 0 {
				t.Errorf("p.Stack is empty")
			}
			if got := err.Error(); strings.Contains(got, tokAdmin) {
				t.Errorf("err.Error() = %q, want it not to contain %q", got, tokAdmin)
			}
			if len(pr.Subject()) != 0 {
				t.Errorf("pr.Subject() = %v, want empty", pr.Subject())
			}
		})
	}
}

// authFunc adapts a function to Authenticator.
type authFunc func(ctx context.Context, credential string) (bindsec.Principal, error)

func (f authFunc) Authenticate(ctx context.Context, credential string) (bindsec.Principal, error) {
	return f(ctx, credential)
}

// valueAuth is an authenticator that is not a pointer: never "nil".
type valueAuth struct{}

func (valueAuth) Authenticate(context.Context, string) (bindsec.Principal, error) {
	return bindsec.Principal{}, bindsec.ErrUnauthenticated
}
