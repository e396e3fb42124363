package bindsec_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
)

// tallyAuth counts its calls, and knows one token.
type tallyAuth struct{ calls int }

func (a *tallyAuth) Authenticate(_ context.Context, cred string) (bindsec.Principal, error) {
	a.calls++
	if cred == "alice-token" {
		return bindsec.NewPrincipal("alice", "reader"), nil
	}
	return bindsec.Principal{}, bindsec.ErrUnauthenticated
}

// A context vouches for one credential alone: WithPrincipal answers it
// without the authenticator (a zero principal refuses it), WithAlias
// authenticates what it stands for; any other credential is
// authenticated as it is; a nil authenticator admits no one, vouched for
// or not.
func TestVouchedCredentials(t *testing.T) {
	ctx := context.Background()
	plan := bindsec.Plan{Roles: []string{"reader"}}
	bob := bindsec.NewPrincipal("bob", "reader")
	cases := []struct {
		name   string
		ctx    context.Context
		cred   string
		nilA   bool
		want   string // subject; "" refused
		calls  int
		reason error
	}{
		{"vouched principal", bindsec.WithPrincipal(ctx, "mark-1", bob), "mark-1", false, "bob", 0, nil},
		{"vouched refusal", bindsec.WithPrincipal(ctx, "mark-1", bindsec.Principal{}), "mark-1", false, "", 0, bindsec.ErrUnauthenticated},
		{"vouched, expired", bindsec.WithPrincipal(ctx, "mark-1", bob.WithExpires(time.Unix(1, 0))), "mark-1", false, "", 0, bindsec.ErrExpired},
		{"another credential", bindsec.WithPrincipal(ctx, "mark-1", bob), "mark-2", false, "", 1, bindsec.ErrUnauthenticated},
		{"vouched, no authenticator", bindsec.WithPrincipal(ctx, "mark-1", bob), "mark-1", true, "", 0, bindsec.ErrUnauthenticated},
		{"alias", bindsec.WithAlias(ctx, "mark-1", "alice-token"), "mark-1", false, "alice", 1, nil},
		{"alias of an unknown token", bindsec.WithAlias(ctx, "mark-1", "eve-token"), "mark-1", false, "", 1, bindsec.ErrUnauthenticated},
		{"not the alias", bindsec.WithAlias(ctx, "mark-1", "alice-token"), "mark-2", false, "", 1, bindsec.ErrUnauthenticated},
		{"nothing vouched", ctx, "mark-1", false, "", 1, bindsec.ErrUnauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &tallyAuth{}
			var auth bindsec.Authenticator = a
			if tc.nilA {
				auth = nil
			}
			pr, err := plan.Check(tc.ctx, tc.cred, auth)
			if tc.want == "" {
				require.ErrorIs(t, err, tc.reason)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, pr.Subject())
			}
			assert.Equal(t, tc.calls, a.calls, "authenticator calls")
		})
	}
}
