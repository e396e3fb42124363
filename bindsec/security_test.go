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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)

	roles := slices.Collect(pr.Roles())
	roles[0] = "admin"
	for i := range roles {
		roles[i] = strings.ToUpper(roles[i])
	}
	expired := pr.WithExpires(time.Unix(1, 0))
	require.True(t, expired.Expired(time.Now()))

	again, err := auth.Authenticate(context.Background(), tokReader)
	require.NoError(t, err)
	assert.Equal(t, "rex", again.Subject())
	assert.Equal(t, []string{"viewer"}, slices.Collect(again.Roles()))
	assert.False(t, again.HasRole("admin"))
	assert.True(t, again.Expires().IsZero())
	assert.NoError(t, bindsec.Plan{Roles: []string{"viewer"}}.Authorize(again, time.Now()))
	assert.ErrorIs(t, bindsec.Plan{Roles: []string{"admin"}}.Authorize(again, time.Now()), bindsec.ErrForbidden)
}

// NewPrincipal copies its roles: the caller's slice is not the principal's.
func TestNewPrincipalCopiesRoles(t *testing.T) {
	roles := []string{"viewer"}
	pr := bindsec.NewPrincipal("rex", roles...)
	roles[0] = "admin"
	assert.True(t, pr.HasRole("viewer"))
	assert.False(t, pr.HasRole("admin"))
	assert.Equal(t, 1, pr.NumRoles())
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
	assert.Zero(t, allocs, "authenticating and reading the roles allocated")
	assert.Positive(t, n)

	// The whole guard of a call, through the panic-recovering Authenticate.
	b := bindsec.NewBook()
	tok := live(t)
	require.NoError(t, b.RegisterPlan("r", bindsec.Plan{Roles: []string{"ops"}}, tok.Ref()))
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := b.GuardOwned(context.Background(), "r", tok.Ref(), tokAdmin, auth); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "an admitted guard allocated")
}

// ---- Plan validation ----------------------------------------------------

// A public plan that lists roles is refused by both registrations, and
// nothing changes: neither reading ("public" or "needs the roles") is
// chosen silently.
func TestPublicPlanWithRolesRefused(t *testing.T) {
	bad := bindsec.Plan{Public: true, Roles: []string{"admin"}}
	require.ErrorIs(t, bad.Validate(), bindsec.ErrInvalidPlan)
	require.NoError(t, bindsec.Plan{Public: true}.Validate())
	require.NoError(t, bindsec.Plan{Roles: []string{"admin"}}.Validate())

	b := bindsec.NewBook()
	err := b.RegisterPlan("tool", bad, live(t).Ref())
	require.ErrorIs(t, err, bindsec.ErrInvalidPlan)
	_, ok := b.PlanFor("tool")
	assert.False(t, ok, "a refused plan was stored")

	incumbent := live(t)
	require.NoError(t, b.RegisterPlan("tool", bindsec.Plan{Roles: []string{"ops"}}, incumbent.Ref()))
	err = b.RegisterPlanTakeover("tool", bad, incumbent.Ref())
	require.ErrorIs(t, err, bindsec.ErrInvalidPlan)
	p, ok := b.PlanFor("tool")
	require.True(t, ok)
	assert.Equal(t, bindsec.Plan{Roles: []string{"ops"}}, p, "a refused takeover changed the plan")
}

// ---- Authenticators that are nil or panic -------------------------------

func TestCheckAuthenticator(t *testing.T) {
	var typedNil *bindsec.StaticTokens
	assert.NoError(t, bindsec.CheckAuthenticator(nil), "no authenticator is a valid configuration")
	assert.NoError(t, bindsec.CheckAuthenticator(bindsec.NewStaticTokens(nil)))
	err := bindsec.CheckAuthenticator(typedNil)
	assert.ErrorIs(t, err, bindsec.ErrInvalidAuthenticator)
	var fn authFunc
	assert.ErrorIs(t, bindsec.CheckAuthenticator(fn), bindsec.ErrInvalidAuthenticator)

	assert.False(t, bindsec.Configured(nil))
	assert.False(t, bindsec.Configured(typedNil), "a typed nil counted as configured")
	assert.True(t, bindsec.Configured(bindsec.NewStaticTokens(nil)))
	assert.True(t, bindsec.Configured(valueAuth{}))
}

// A typed-nil authenticator on the guard path refuses, never crashes.
func TestTypedNilAuthenticatorRefuses(t *testing.T) {
	var typedNil *bindsec.StaticTokens
	b := bindsec.NewBook()
	require.NoError(t, b.RegisterPlan("tool", bindsec.Plan{}, live(t).Ref()))
	_, err := b.Guard(context.Background(), "tool", tokAdmin, typedNil)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated)
	_, err = typedNil.Authenticate(context.Background(), tokAdmin)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated)
	assert.Zero(t, typedNil.Len())
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
	require.NoError(t, b.RegisterPlan("tool", bindsec.Plan{}, tok.Ref()))
	for name, guard := range map[string]func() (bindsec.Principal, error){
		"Guard": func() (bindsec.Principal, error) { return b.Guard(context.Background(), "tool", tokAdmin, boom) },
		"GuardOwned": func() (bindsec.Principal, error) {
			return b.GuardOwned(context.Background(), "tool", tok.Ref(), tokAdmin, boom)
		},
	} {
		t.Run(name, func(t *testing.T) {
			pr, err := guard()
			require.ErrorIs(t, err, bindsec.ErrAuthenticatorPanicked)
			assert.NotErrorIs(t, err, bindsec.ErrUnauthenticated, "a panic is an internal error, not a denial")
			var p *bindsec.AuthenticatorPanic
			require.True(t, errors.As(err, &p))
			assert.Equal(t, "cannot parse token "+tokAdmin, p.Value)
			assert.NotEmpty(t, p.Stack)
			assert.NotContains(t, err.Error(), tokAdmin)
			assert.Empty(t, pr.Subject())
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
