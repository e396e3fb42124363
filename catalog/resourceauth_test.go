package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
)

// AuthorizeResource refuses exactly what ReadResource refuses before its
// gate, with the same error, and admits what it admits, naming the
// owner the read would reach and the principal the plan admitted; it
// never runs the reader.
func TestAuthorizeResourceAsRead(t *testing.T) {
	expires := time.Now().Add(time.Hour)
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"admin":  bindsec.NewPrincipal("alice", "admin").WithExpires(expires),
		"viewer": bindsec.NewPrincipal("victor", "viewer"),
		"old":    bindsec.NewPrincipal("olga", "admin").WithExpires(time.Unix(1, 0)),
	})
	c := newCatalog(t, catalog.Config{Authenticator: auth, MaxURIBytes: 64})
	reads := 0
	read := func(context.Context, catalog.Read) (catalog.Contents, error) {
		reads++
		return catalog.Contents{Text: "x"}, nil
	}
	ctx := context.Background()
	fixed, err := c.StartResource(ctx, catalog.Resource{URI: "test://admin"}, bindsec.Plan{Roles: []string{"admin"}}, read)
	require.NoError(t, err)
	open, err := c.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://open/{id}", Name: "open"}, bindsec.Plan{Public: true}, read)
	require.NoError(t, err)
	bare, err := c.StartResource(ctx, catalog.Resource{URI: "test://bare"}, bindsec.Plan{}, read, catalog.WithoutPlan())
	require.NoError(t, err)
	for _, k := range []*catalog.Consumer{fixed, open, bare} {
		t.Cleanup(func() { _ = k.Stop(ctx) })
	}

	for _, tc := range []struct {
		uri, cred string
		owner     *catalog.Consumer // nil: refused
		expires   time.Time
	}{
		{"test://admin", "admin", fixed, expires},
		{"test://admin", "viewer", nil, time.Time{}},
		{"test://admin", "", nil, time.Time{}},
		{"test://admin", "bogus", nil, time.Time{}},
		{"test://admin", "old", nil, time.Time{}},
		{"test://open/1", "", open, time.Time{}},
		{"test://open/a%00b", "", nil, time.Time{}}, // a NUL in a variable
		{"test://bare", "admin", nil, time.Time{}},  // no plan: denied by default
		{"test://nobody", "admin", nil, time.Time{}},
		{"test://" + strings.Repeat("x", 80), "admin", nil, time.Time{}},
	} {
		t.Run(tc.uri[:min(len(tc.uri), 24)]+"/"+tc.cred, func(t *testing.T) {
			_, readErr := c.ReadResource(ctx, tc.uri, tc.cred)
			before := reads
			o, pr, err := c.AuthorizeResource(ctx, tc.uri, tc.cred)
			assert.Equal(t, before, reads, "the reader ran")
			if tc.owner == nil {
				require.Error(t, err)
				require.Error(t, readErr)
				assert.Equal(t, readErr.Error(), err.Error())
				assert.Equal(t, catalog.Denied(readErr), catalog.Denied(err))
				assert.Equal(t, owner.Ref{}, o)
				assert.True(t, pr.IsZero())
				return
			}
			require.NoError(t, readErr)
			require.NoError(t, err)
			assert.True(t, o.Same(tc.owner.Owner()))
			assert.Equal(t, tc.expires, pr.Expires())
		})
	}
}
