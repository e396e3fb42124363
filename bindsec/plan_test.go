package bindsec_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is an arbitrary fixed instant: expiry tests must not depend on when
// they run.
var t0 = time.Date(2026, 8, 29, 12, 0, 0, 0, time.UTC)

func TestAuthorize(t *testing.T) {
	admin := bindsec.NewPrincipal("ada", "admin", "ops")
	expiring := func(at time.Time, roles ...string) bindsec.Principal {
		return bindsec.NewPrincipal("eve", roles...).WithExpires(at)
	}
	tests := []struct {
		name    string
		plan    bindsec.Plan
		pr      bindsec.Principal
		now     time.Time
		want    error  // nil: authorized
		naming  string // a role the refusal must name
		comment string
	}{
		{name: "public admits the zero principal", plan: bindsec.Plan{Public: true}},
		{
			name: "a public plan with roles admits no one", plan: bindsec.Plan{Public: true, Roles: []string{"admin"}}, pr: admin, now: t0,
			want:    bindsec.ErrInvalidPlan,
			comment: "the plan contradicts itself: neither reading may be chosen silently",
		},
		{name: "public admits an expired principal", plan: bindsec.Plan{Public: true}, pr: expiring(t0), now: t0},
		{
			name: "zero plan admits any authenticated principal", pr: bindsec.NewPrincipal("x"), now: t0,
			comment: "the zero Plan is 'authenticated, no roles', not 'open'",
		},
		{name: "every role held", plan: bindsec.Plan{Roles: []string{"admin", "ops"}}, pr: admin, now: t0},
		{name: "a subset of the principal's roles", plan: bindsec.Plan{Roles: []string{"ops"}}, pr: admin, now: t0},
		{
			name: "one role missing", plan: bindsec.Plan{Roles: []string{"admin", "billing"}}, pr: admin, now: t0,
			want: bindsec.ErrForbidden, naming: "billing",
		},
		{
			name: "no roles at all", plan: bindsec.Plan{Roles: []string{"admin"}}, pr: bindsec.NewPrincipal("x"), now: t0,
			want: bindsec.ErrForbidden, naming: "admin",
		},
		{
			name: "roles are case-sensitive", plan: bindsec.Plan{Roles: []string{"Admin"}}, pr: admin, now: t0,
			want: bindsec.ErrForbidden, naming: "Admin",
		},
		{
			name: "a role is not a prefix match", plan: bindsec.Plan{Roles: []string{"adm"}}, pr: admin, now: t0,
			want: bindsec.ErrForbidden, naming: "adm",
		},
		{name: "valid one nanosecond before Expires", plan: bindsec.Plan{Roles: []string{"admin"}}, pr: expiring(t0, "admin"), now: t0.Add(-time.Nanosecond)},
		{
			name: "expired exactly at Expires", plan: bindsec.Plan{Roles: []string{"admin"}}, pr: expiring(t0, "admin"), now: t0,
			want: bindsec.ErrExpired, comment: "Expires is exclusive",
		},
		{name: "expired after Expires", plan: bindsec.Plan{}, pr: expiring(t0, "admin"), now: t0.Add(time.Hour), want: bindsec.ErrExpired},
		{
			name: "expired wins over a missing role", plan: bindsec.Plan{Roles: []string{"billing"}}, pr: expiring(t0), now: t0,
			want: bindsec.ErrExpired,
		},
		{
			name: "zero Expires never expires", plan: bindsec.Plan{Roles: []string{"admin"}}, pr: admin,
			now: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		},
		{name: "zero Expires at the zero now", plan: bindsec.Plan{}, pr: admin, now: time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.plan.Authorize(tt.pr, tt.now)
			if tt.want == nil {
				assert.NoError(t, err, tt.comment)
				return
			}
			require.ErrorIs(t, err, tt.want, tt.comment)
			if tt.naming != "" {
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", tt.naming), "a refusal names the missing role")
			}
		})
	}
}

func TestPrincipalHelpers(t *testing.T) {
	pr := bindsec.NewPrincipal("", "a", "b").WithExpires(t0)
	for _, tt := range []struct {
		now  time.Time
		want bool
	}{
		{t0.Add(-time.Nanosecond), false},
		{t0, true}, // exclusive
		{t0.Add(time.Nanosecond), true},
	} {
		assert.Equal(t, tt.want, pr.Expired(tt.now), "Expired at Expires%+v", tt.now.Sub(t0))
	}
	forever := bindsec.Principal{}
	assert.False(t, forever.Expired(time.Time{}))
	assert.False(t, forever.Expired(t0))
	assert.False(t, forever.Expired(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)))

	assert.True(t, pr.HasRole("a"))
	assert.True(t, pr.HasRole("b"))
	assert.False(t, pr.HasRole("c"))
	assert.False(t, pr.HasRole(""), "the empty role is not held by accident")
	assert.False(t, bindsec.Principal{}.HasRole("a"))
}

// Tokens used across the tests. They are long and distinctive so that a
// leak search for them cannot hit by chance.
const (
	tokAdmin   = "s3cr3t-admin-7a1c9e0f4b2d"
	tokReader  = "s3cr3t-reader-5e8d2c7b1a90"
	tokExpired = "s3cr3t-expired-0b9f3d6a2c44"
)

func staticTable() map[string]bindsec.Principal {
	return map[string]bindsec.Principal{
		tokAdmin:   bindsec.NewPrincipal("ada", "admin", "ops"),
		tokReader:  bindsec.NewPrincipal("rex", "reader"),
		tokExpired: bindsec.NewPrincipal("old", "admin", "ops").WithExpires(time.Unix(1, 0)),
	}
}

func TestStaticTokens(t *testing.T) {
	ctx := context.Background()
	table := staticTable()
	table[""] = bindsec.NewPrincipal("nobody", "admin")
	s := bindsec.NewStaticTokens(table)
	assert.Equal(t, 3, s.Len(), "the empty token is dropped")

	tests := []struct {
		name       string
		credential string
		want       string // subject; "" for a refusal
	}{
		{"valid", tokAdmin, "ada"},
		{"another valid", tokReader, "rex"},
		{"expired principals still authenticate; Authorize refuses them", tokExpired, "old"},
		{"unknown", "s3cr3t-guess", ""},
		{"empty, although the table had an empty key", "", ""},
		{"a prefix of a valid token", tokAdmin[:len(tokAdmin)-1], ""},
		{"a valid token with a suffix", tokAdmin + "x", ""},
		{"the credential is the bare token, not the header", "Bearer " + tokAdmin, ""},
		{"case matters", strings.ToUpper(tokAdmin), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, err := s.Authenticate(ctx, tt.credential)
			if tt.want == "" {
				require.ErrorIs(t, err, bindsec.ErrUnauthenticated)
				assert.Zero(t, pr)
				if tt.credential != "" {
					assert.NotContains(t, err.Error(), tt.credential, "a refusal must not echo the credential")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, pr.Subject())
			assert.Equal(t, staticTable()[tt.credential], pr)
		})
	}
}

func TestStaticTokensEmptyTable(t *testing.T) {
	for _, table := range []map[string]bindsec.Principal{nil, {}, {"": bindsec.NewPrincipal("nobody")}} {
		s := bindsec.NewStaticTokens(table)
		assert.Zero(t, s.Len())
		for _, cred := range []string{"", "x", tokAdmin} {
			_, err := s.Authenticate(context.Background(), cred)
			assert.ErrorIs(t, err, bindsec.ErrUnauthenticated)
		}
	}
}

// The table must hold nothing from which a token can be read back: no
// string, no byte sequence, and no formatted form of it contains a
// plaintext, and each token is present only as its SHA-256 digest.
func TestStaticTokensKeepOnlyDigests(t *testing.T) {
	table := staticTable()
	s := bindsec.NewStaticTokens(table)

	var strs []string
	var blobs [][]byte
	collect(reflect.ValueOf(s), &strs, &blobs)
	require.NotEmpty(t, blobs, "the walk must reach the stored digests")
	for tok := range table {
		for _, str := range strs {
			assert.NotContains(t, str, tok, "a plaintext token is stored as a string")
		}
		digest := sha256.Sum256([]byte(tok))
		found := false
		for _, b := range blobs {
			assert.False(t, bytes.Contains(b, []byte(tok)), "a plaintext token is stored as bytes")
			found = found || bytes.Equal(b, digest[:])
		}
		assert.True(t, found, "each token is kept as its SHA-256 digest")
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
			assert.NotContains(t, fmt.Sprintf(verb, s), tok, "formatting with %s reveals a token", verb)
			assert.NotContains(t, fmt.Sprintf(verb, *s), tok, "formatting with %s reveals a token", verb)
		}
	}
}

// collect walks v and gathers every string and every byte array or slice
// it holds, unexported fields included.
func collect(v reflect.Value, strs *[]string, blobs *[][]byte) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collect(v.Elem(), strs, blobs)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			collect(v.Field(i), strs, blobs)
		}
	case reflect.Array, reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			*blobs = append(*blobs, b)
			return
		}
		for i := range v.Len() {
			collect(v.Index(i), strs, blobs)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			collect(it.Key(), strs, blobs)
			collect(it.Value(), strs, blobs)
		}
	case reflect.String:
		*strs = append(*strs, v.String())
	}
}

// The table copies its input: a caller that later edits its map or the
// principals' role slices changes nothing.
func TestStaticTokensCopyTheirInput(t *testing.T) {
	roles := []string{"admin", "ops"}
	table := map[string]bindsec.Principal{tokAdmin: bindsec.NewPrincipal("ada", roles...)}
	s := bindsec.NewStaticTokens(table)

	roles[0] = "root"
	table[tokAdmin] = bindsec.NewPrincipal("mallory")
	table[tokReader] = bindsec.NewPrincipal("rex")
	delete(table, tokAdmin)

	pr, err := s.Authenticate(context.Background(), tokAdmin)
	require.NoError(t, err)
	assert.Equal(t, "ada", pr.Subject())
	assert.Equal(t, []string{"admin", "ops"}, slices.Collect(pr.Roles()))
	_, err = s.Authenticate(context.Background(), tokReader)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "a token added to the map afterwards is unknown")
}

// Plans are copied on registration, by either register: a caller editing
// its Roles slice afterwards must not loosen (or change) the stored plan.
func TestPlanCopiedOnRegister(t *testing.T) {
	for _, reg := range []struct {
		name string
		fn   func(b *bindsec.Book, route string, p bindsec.Plan, o owner.Ref) error
	}{
		{"RegisterPlan", func(b *bindsec.Book, route string, p bindsec.Plan, o owner.Ref) error {
			return b.RegisterPlan(route, p, o)
		}},
		{"RegisterPlanTakeover", func(b *bindsec.Book, route string, p bindsec.Plan, o owner.Ref) error {
			return b.RegisterPlanTakeover(route, p, o)
		}},
	} {
		t.Run(reg.name, func(t *testing.T) {
			b := bindsec.NewBook()
			roles := []string{"admin", "ops"}
			require.NoError(t, reg.fn(b, "tool", bindsec.Plan{Roles: roles}, live(t).Ref()))

			roles[0] = "nobody"

			p, ok := b.PlanFor("tool")
			require.True(t, ok)
			assert.Equal(t, []string{"admin", "ops"}, p.Roles)
			assert.Equal(t, []bindsec.RoutePlan{{Route: "tool", Plan: bindsec.Plan{Roles: []string{"admin", "ops"}}}}, b.Plans())

			// The stored plan still refuses a principal that holds only
			// what the caller wrote into its slice.
			_, err := b.Guard(context.Background(), "tool", tokReader,
				bindsec.NewStaticTokens(map[string]bindsec.Principal{tokReader: bindsec.NewPrincipal("", "nobody", "ops")}))
			assert.ErrorIs(t, err, bindsec.ErrForbidden)
		})
	}
}

// Plan.Check, which a catalog runs on the plan in a route's entry: a public
// plan admits without looking at the credential, others authenticate and
// authorize, and a panicking authenticator fails closed.
func TestPlanCheck(t *testing.T) {
	ctx := context.Background()
	pr, err := bindsec.Plan{Public: true}.Check(ctx, "", nil)
	require.NoError(t, err)
	assert.True(t, pr.IsZero())

	_, err = adminPlan.Check(ctx, "", tokens)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "no credential")
	_, err = adminPlan.Check(ctx, "nobody", tokens)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "an unknown credential")
	_, err = adminPlan.Check(ctx, tokAdmin, nil)
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "no authenticator")
	_, err = adminPlan.Check(ctx, tokReader, tokens)
	assert.ErrorIs(t, err, bindsec.ErrForbidden)
	pr, err = adminPlan.Check(ctx, tokAdmin, tokens)
	require.NoError(t, err)
	assert.Equal(t, "ada", pr.Subject())
	_, err = bindsec.Plan{Public: true, Roles: []string{"x"}}.Check(ctx, tokAdmin, tokens)
	assert.ErrorIs(t, err, bindsec.ErrInvalidPlan, "an invalid plan admits no one")
}
