package bindsec_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

// ---- Guard and GuardOwned --------------------------------------------------

// countingAuth records whether it was asked, so that a test can tell that
// a public or missing plan never looks at the credential.
type countingAuth struct{ calls atomic.Int64 }

func (a *countingAuth) Authenticate(c context.Context, cred string) (bindsec.Principal, error) {
	a.calls.Add(1)
	return tokens.Authenticate(c, cred)
}

func TestGuardPlanStates(t *testing.T) {
	type want struct{ deny, pass error } // errNone: granted
	errNone := error(nil)
	tests := []struct {
		name  string
		setup func(t *testing.T, b *bindsec.Book)
		cred  string
		want  want
		// authed: the authenticator must be consulted.
		authed bool
	}{
		{"public, no credential", registerLive("tool", bindsec.Plan{Public: true}), "", want{errNone, errNone}, false},
		{"public, garbage credential", registerLive("tool", bindsec.Plan{Public: true}), "garbage", want{errNone, errNone}, false},
		{"public, expired credential", registerLive("tool", bindsec.Plan{Public: true}), tokExpired, want{errNone, errNone}, false},
		{"guarded, no credential", registerLive("tool", adminPlan), "", want{bindsec.ErrUnauthenticated, bindsec.ErrUnauthenticated}, false},
		{"guarded, unknown", registerLive("tool", adminPlan), "garbage", want{bindsec.ErrUnauthenticated, bindsec.ErrUnauthenticated}, true},
		{"guarded, valid", registerLive("tool", adminPlan), tokAdmin, want{errNone, errNone}, true},
		{"guarded, lacking a role", registerLive("tool", adminPlan), tokReader, want{bindsec.ErrForbidden, bindsec.ErrForbidden}, true},
		{"guarded, expired", registerLive("tool", adminPlan), tokExpired, want{bindsec.ErrExpired, bindsec.ErrExpired}, true},
		{"missing, no credential", func(*testing.T, *bindsec.Book) {}, "", want{bindsec.ErrNoPlan, errNone}, false},
		{"missing, valid credential", func(*testing.T, *bindsec.Book) {}, tokAdmin, want{bindsec.ErrNoPlan, errNone}, false},
		{"dead owner's plan, no credential", registerDead("tool", adminPlan), "", want{bindsec.ErrNoPlan, errNone}, false},
		{"dead owner's public plan", registerDead("tool", bindsec.Plan{Public: true}), "", want{bindsec.ErrNoPlan, errNone}, false},
		{"unregistered plan", func(t *testing.T, b *bindsec.Book) {
			o := live(t)
			if err := b.RegisterPlan("tool", adminPlan, o.Ref()); err != nil {
				t.Fatal(err)
			}
			if !b.UnregisterPlanOwned("tool", o.Ref()) {
				t.Fatalf("b.UnregisterPlanOwned(\"tool\", o.Ref()) is false")
			}
		}, "", want{bindsec.ErrNoPlan, errNone}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachMode(t, func(t *testing.T, b *bindsec.Book) {
				tt.setup(t, b)
				expect := tt.want.deny
				if b.Mode() == bindsec.PassThrough {
					expect = tt.want.pass
				}
				a := &countingAuth{}
				pr, err := b.Guard(ctx, "tool", tt.cred, a)
				noCredentialLeak(t, err, tt.cred)
				if expect == nil {
					if err != nil {
						t.Fatal(err)
					}
				} else {
					if !errors.Is(err, expect) {
						t.Fatalf("err = %v, want %v", err, expect)
					}
					if pr != (bindsec.Principal{}) {
						t.Errorf("pr = %v, want bindsec.Principal{}", pr)
					}
				}
				if !tt.authed {
					if got := a.calls.Load(); got != 0 {
						t.Errorf("the credential must not be looked at: a.calls.Load() = %v, want 0", got)
					}
					if pr != (bindsec.Principal{}) {
						t.Errorf("an unchecked request carries no principal: pr = %v, want bindsec.Principal{}", pr)
					}
				} else {
					if got := a.calls.Load(); got != int64(1) {
						t.Errorf("a.calls.Load() = %v, want int64(1)", got)
					}
				}
			})
		})
	}
}

func registerLive(route string, p bindsec.Plan) func(t *testing.T, b *bindsec.Book) {
	return func(t *testing.T, b *bindsec.Book) {
		if err := b.RegisterPlan(route, p, live(t).Ref()); err != nil {
			t.Fatal(err)
		}
	}
}

func registerDead(route string, p bindsec.Plan) func(t *testing.T, b *bindsec.Book) {
	return func(t *testing.T, b *bindsec.Book) {
		tok := owner.New()
		if err := b.RegisterPlan(route, p, tok.Ref()); err != nil {
			t.Fatal(err)
		}
		tok.Release()
	}
}

// errAuth is an authenticator that fails with its own error.
type errAuth struct{ err error }

func (a errAuth) Authenticate(context.Context, string) (bindsec.Principal, error) {
	return bindsec.Principal{}, a.err
}

func TestGuardAuthenticatorFailures(t *testing.T) {
	b := bindsec.NewBook(bindsec.WithMissingPlan(bindsec.PassThrough))
	if err := b.RegisterPlan("tool", adminPlan, live(t).Ref()); err != nil {
		t.Fatal(err)
	}

	_, err := b.Guard(ctx, "tool", tokAdmin, nil)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("no authenticator means nobody is authenticated: err = %v, want bindsec.ErrUnauthenticated", err)
	}

	backend := errors.New("token service unreachable")
	_, err = b.Guard(ctx, "tool", tokAdmin, errAuth{backend})
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("any authenticator failure is a refusal: err = %v, want bindsec.ErrUnauthenticated", err)
	}
	if !errors.Is(err, backend) {
		t.Errorf("the cause is kept: err = %v, want %v", err, backend)
	}

	_, err = b.Guard(ctx, "tool", tokAdmin, errAuth{fmt.Errorf("%w: revoked", bindsec.ErrUnauthenticated)})
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
	}

	// A public plan needs no authenticator at all.
	if err := b.RegisterPlan("open", bindsec.Plan{Public: true}, live(t).Ref()); err != nil {
		t.Fatal(err)
	}
	_, err = b.Guard(ctx, "open", "", nil)
	if err != nil {
		t.Error(err)
	}
}

// Expires is exclusive on Guard's own clock too.
func TestGuardExpiryBoundary(t *testing.T) {
	var now atomic.Pointer[time.Time]
	b := bindsec.NewBook(bindsec.WithClock(func() time.Time { return *now.Load() }))
	if err := b.RegisterPlan("tool", adminPlan, live(t).Ref()); err != nil {
		t.Fatal(err)
	}
	a := bindsec.NewStaticTokens(map[string]bindsec.Principal{"tok": bindsec.NewPrincipal("", "admin").WithExpires(t0)})
	for _, tt := range []struct {
		at   time.Time
		want error
	}{
		{t0.Add(-time.Nanosecond), nil},
		{t0, bindsec.ErrExpired},
		{t0.Add(time.Nanosecond), bindsec.ErrExpired},
	} {
		at := tt.at
		now.Store(&at)
		_, err := b.Guard(ctx, "tool", "tok", a)
		if tt.want == nil {
			if err != nil {
				t.Errorf("at Expires%v: %v", at.Sub(t0), err)
			}
		} else {
			if !errors.Is(err, tt.want) {
				t.Errorf("at Expires%v: err = %v, want %v", at.Sub(t0), err, tt.want)
			}
		}
	}
}

// A request bound to one owner's route entry is never checked against, or
// passed through under, another owner's plan: not even a public one, not
// even with valid credentials, in either mode.
func TestGuardOwnedOtherOwnersPlan(t *testing.T) {
	for _, plan := range []bindsec.Plan{{Public: true}, {}, adminPlan} {
		for _, cred := range []string{"", tokAdmin} {
			t.Run(fmt.Sprintf("public=%v,roles=%v,cred=%v", plan.Public, plan.Roles, cred != ""), func(t *testing.T) {
				eachMode(t, func(t *testing.T, b *bindsec.Book) {
					bound, newcomer := live(t), live(t)
					if err := b.RegisterPlanTakeover("tool", plan, newcomer.Ref()); err != nil {
						t.Fatal(err)
					}
					a := &countingAuth{}
					pr, err := b.GuardOwned(ctx, "tool", bound.Ref(), cred, a)
					if !errors.Is(err, bindsec.ErrPlanOwner) {
						t.Fatalf("err = %v, want bindsec.ErrPlanOwner", err)
					}
					if pr != (bindsec.Principal{}) {
						t.Errorf("pr = %v, want bindsec.Principal{}", pr)
					}
					if got := a.calls.Load(); got != 0 {
						t.Errorf("the newcomer's rules must not be applied: a.calls.Load() = %v, want 0", got)
					}
					noCredentialLeak(t, err, cred)

					// The zero Ref is nobody's owner either.
					_, err = b.GuardOwned(ctx, "tool", owner.Ref{}, cred, a)
					if !errors.Is(err, bindsec.ErrPlanOwner) {
						t.Errorf("err = %v, want bindsec.ErrPlanOwner", err)
					}
				})
			})
		}
	}
}

func TestGuardOwnedOwnPlan(t *testing.T) {
	eachMode(t, func(t *testing.T, b *bindsec.Book) {
		o := live(t)
		if err := b.RegisterPlan("tool", adminPlan, o.Ref()); err != nil {
			t.Fatal(err)
		}
		_, err := b.GuardOwned(ctx, "tool", o.Ref(), "", tokens)
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
		}
		_, err = b.GuardOwned(ctx, "tool", o.Ref(), tokAdmin, tokens)
		if err != nil {
			t.Error(err)
		}

		// Without a live plan of o's, GuardOwned refuses in both modes:
		// the missing-plan mode is for routes whose owner registered none,
		// which GuardOwned cannot tell from a plan that is gone.
		_, err = b.GuardOwned(ctx, "other", o.Ref(), tokAdmin, tokens)
		if !errors.Is(err, bindsec.ErrPlanOwner) {
			t.Errorf("err = %v, want bindsec.ErrPlanOwner", err)
		}
		_, err = b.MissingPlan("other")
		if b.Mode() == bindsec.Deny {
			if !errors.Is(err, bindsec.ErrNoPlan) {
				t.Errorf("err = %v, want bindsec.ErrNoPlan", err)
			}
		} else {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// The package promises that a dispatcher using GuardOwned never runs a body
// "under another owner's plan or under none", in either mode. A request
// bound to an owner that died after the request resolved its entry finds
// that owner's plan ignored; GuardOwned must refuse it rather than fall
// back to the missing-plan rule, which in PassThrough mode would admit it,
// with no credential, to a route whose owner required admin. The body could
// still run, because a token killed through its context does not stop the
// consumer's goroutine (package owner).
func TestGuardOwnedDeadBoundOwner(t *testing.T) {
	eachMode(t, func(t *testing.T, b *bindsec.Book) {
		c, cancel := context.WithCancel(ctx)
		o := owner.NewContext(c)
		if err := b.RegisterPlan("tool", adminPlan, o.Ref()); err != nil {
			t.Fatal(err)
		}
		// The request resolved the entry and is bound to o; then the
		// supervisor kills o.
		bound := o.Ref()
		cancel()
		<-bound.Done()

		_, err := b.GuardOwned(ctx, "tool", bound, "", tokens)
		if err == nil {
			t.Errorf("a request without credentials, bound to a dead owner whose plan required admin, was granted (mode %v): err returned no error", b.Mode())
		}
		_, err = b.GuardOwned(ctx, "tool", bound, tokReader, tokens)
		if err == nil {
			t.Errorf("a request lacking the role, bound to a dead owner whose plan required admin, was granted (mode %v): err returned no error", b.Mode())
		}
	})
}
