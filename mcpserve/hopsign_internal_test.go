package mcpserve

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
)

// panicAuth panics on every credential.
type panicAuth struct{}

func (panicAuth) Authenticate(context.Context, string) (bindsec.Principal, error) { panic("boom") }

// The forwarder asserts what its authenticator says of the caller's
// credential, as the mark stands for it: the principal's subject and
// roles, until the principal's expiry or maxAssertionLife, whichever
// comes first; a refused credential is asserted refused, with its mark;
// no credential is asserted anonymous; a panicking authenticator fails
// the forward.
func TestHopAssertion(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"alice-token": bindsec.NewPrincipal("alice", "reader", "writer"),
		"brief-token": bindsec.NewPrincipal("brief", "reader").WithExpires(now.Add(10 * time.Second)),
	})
	g := &hopSigner{markKey: deriveMarkKey("fleet-token-0123456789"), auth: auth}
	assertOf := func(token string) hopAssertion {
		cred := g.markCredential(token)
		enc, err := g.assert(bindsec.WithAlias(context.Background(), cred, token), cred, now)
		require.NoError(t, err)
		a, err := decodeAssertion(enc)
		require.NoError(t, err)
		return a
	}
	alice := assertOf("alice-token")
	assert.Equal(t, hopAssertion{Subject: "alice", Roles: []string{"reader", "writer"}, Expires: now.Add(maxAssertionLife).UnixMilli(),
		Mark: alice.Mark, Authenticated: true}, alice)
	assert.NotContains(t, alice.Mark, "alice-token")
	assert.Equal(t, alice.Mark, assertOf("alice-token").Mark, "a mark is the same each time")
	assert.NotEqual(t, alice.Mark, assertOf("brief-token").Mark)

	brief := assertOf("brief-token")
	assert.Equal(t, now.Add(10*time.Second).UnixMilli(), brief.Expires, "the principal's own expiry, the sooner")
	assert.True(t, brief.principal().Expires().Equal(now.Add(10*time.Second)))

	eve := assertOf("eve-token")
	assert.False(t, eve.Authenticated)
	assert.NotEmpty(t, eve.Mark)
	assert.True(t, eve.principal().IsZero())

	enc, err := g.assert(context.Background(), "", now)
	require.NoError(t, err)
	anon, err := decodeAssertion(enc)
	require.NoError(t, err)
	assert.Equal(t, "", anon.credential())

	g.auth = panicAuth{}
	cred := g.markCredential("alice-token")
	_, err = g.assert(bindsec.WithAlias(context.Background(), cred, "alice-token"), cred, now)
	require.ErrorIs(t, err, bindsec.ErrAuthenticatorPanicked)
}
