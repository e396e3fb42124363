package bindsec_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
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
				if err != nil {
					t.Errorf("%v: %v", tt.comment, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("%v: err = %v, want %v", tt.comment, err, tt.want)
			}
			if tt.naming != "" {
				if got := err.Error(); !strings.Contains(got, fmt.Sprintf("%q", tt.naming)) {
					t.Errorf("a refusal names the missing role: err.Error() = %q, want it to contain %q", got, fmt.Sprintf("%q", tt.naming))
				}
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
		if got := pr.Expired(tt.now); got != tt.want {
			t.Errorf("Expired at Expires%+v: pr.Expired(tt.now) = %v, want %v", tt.now.Sub(t0), got, tt.want)
		}
	}
	forever := bindsec.Principal{}
	if forever.Expired(time.Time{}) {
		t.Errorf("forever.Expired(time.Time{}) is true")
	}
	if forever.Expired(t0) {
		t.Errorf("forever.Expired(t0) is true")
	}
	if forever.Expired(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("forever.Expired(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)) is true")
	}

	if !pr.HasRole("a") {
		t.Errorf("pr.HasRole(\"a\") is false")
	}
	if !pr.HasRole("b") {
		t.Errorf("pr.HasRole(\"b\") is false")
	}
	if pr.HasRole("c") {
		t.Errorf("pr.HasRole(\"c\") is true")
	}
	if pr.HasRole("") {
		t.Errorf("the empty role is not held by accident: pr.HasRole(\"\") is true")
	}
	if (bindsec.Principal{}.HasRole("a")) {
		t.Errorf("bindsec.Principal{}.HasRole(\"a\") is true")
	}
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
	if got := s.Len(); got != 3 {
		t.Errorf("the empty token is dropped: s.Len() = %v, want 3", got)
	}

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
				if !errors.Is(err, bindsec.ErrUnauthenticated) {
					t.Fatalf("err = %v, want bindsec.ErrUnauthenticated", err)
				}
				if pr != (bindsec.Principal{}) {
					t.Errorf("pr = %v, want bindsec.Principal{}", pr)
				}
				if tt.credential != "" {
					if got := err.Error(); strings.Contains(got, tt.credential) {
						t.Errorf("a refusal must not echo the credential: err.Error() = %q, want it not to contain %q", got, tt.credential)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pr.Subject(); got != tt.want {
				t.Errorf("pr.Subject() = %q, want %q", got, tt.want)
			}
			if want := staticTable()[tt.credential]; !reflect.DeepEqual(pr, want) {
				t.Errorf("pr = %v, want %v", pr, want)
			}
		})
	}
}

func TestStaticTokensEmptyTable(t *testing.T) {
	for _, table := range []map[string]bindsec.Principal{nil, {}, {"": bindsec.NewPrincipal("nobody")}} {
		s := bindsec.NewStaticTokens(table)
		if got := s.Len(); got != 0 {
			t.Errorf("s.Len() = %v, want 0", got)
		}
		for _, cred := range []string{"", "x", tokAdmin} {
			_, err := s.Authenticate(context.Background(), cred)
			if !errors.Is(err, bindsec.ErrUnauthenticated) {
				t.Errorf("err = %v, want bindsec.ErrUnauthenticated", err)
			}
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
	if len(blobs) == 0 {
		t.Fatalf("the walk must reach the stored digests: blobs is empty")
	}
	for tok := range table {
		for _, str := range strs {
			if strings.Contains(str, tok) {
				t.Errorf("a plaintext token is stored as a string: str = %q, want it not to contain %q", str, tok)
			}
		}
		digest := sha256.Sum256([]byte(tok))
		found := false
		for _, b := range blobs {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("a plaintext token is stored as bytes: bytes.Contains(b, []byte(tok)) is true")
			}
			found = found || bytes.Equal(b, digest[:])
		}
		if !found {
			t.Errorf("each token is kept as its SHA-256 digest: found is false")
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
			if got := fmt.Sprintf(verb, s); strings.Contains(got, tok) {
				t.Errorf("formatting with %s reveals a token: fmt.Sprintf(verb, s) = %q, want it not to contain %q", verb, got, tok)
			}
			if got := fmt.Sprintf(verb, *s); strings.Contains(got, tok) {
				t.Errorf("formatting with %s reveals a token: fmt.Sprintf(verb, *s) = %q, want it not to contain %q", verb, got, tok)
			}
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
	if err != nil {
		t.Fatal(err)
	}
	if got := pr.Subject(); got != "ada" {
		t.Errorf("pr.Subject() = %q, want \"ada\"", got)
	}
	if got, want := slices.Collect(pr.Roles()), ([]string{"admin", "ops"}); !reflect.DeepEqual(got, want) {
		t.Errorf("slices.Collect(pr.Roles()) = %v, want %v", got, want)
	}
	_, err = s.Authenticate(context.Background(), tokReader)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("a token added to the map afterwards is unknown: err = %v, want bindsec.ErrUnauthenticated", err)
	}
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
			if err := reg.fn(b, "tool", bindsec.Plan{Roles: roles}, live(t).Ref()); err != nil {
				t.Fatal(err)
			}

			roles[0] = "nobody"

			p, ok := b.PlanFor("tool")
			if !ok {
				t.Fatalf("b.PlanFor(\"tool\") found nothing")
			}
			if want := ([]string{"admin", "ops"}); !reflect.DeepEqual(p.Roles, want) {
				t.Errorf("p.Roles = %v, want %v", p.Roles, want)
			}
			if got, want := b.Plans(), ([]bindsec.RoutePlan{{Route: "tool", Plan: bindsec.Plan{Roles: []string{"admin", "ops"}}}}); !reflect.DeepEqual(got, want) {
				t.Errorf("b.Plans() = %v, want %v", got, want)
			}

			// The stored plan still refuses a principal that holds only
			// what the caller wrote into its slice.
			_, err := b.Guard(context.Background(), "tool", tokReader,
				bindsec.NewStaticTokens(map[string]bindsec.Principal{tokReader: bindsec.NewPrincipal("", "nobody", "ops")}))
			if !errors.Is(err, bindsec.ErrForbidden) {
				t.Errorf("err = %v, want bindsec.ErrForbidden", err)
			}
		})
	}
}

// Plan.Check, which a catalog runs on the plan in a route's entry: a public
// plan admits without looking at the credential, others authenticate and
// authorize, and a panicking authenticator fails closed.
func TestPlanCheck(t *testing.T) {
	ctx := context.Background()
	pr, err := bindsec.Plan{Public: true}.Check(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.IsZero() {
		t.Errorf("pr.IsZero() is false")
	}

	_, err = adminPlan.Check(ctx, "", tokens)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("no credential: err = %v, want bindsec.ErrUnauthenticated", err)
	}
	_, err = adminPlan.Check(ctx, "nobody", tokens)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("an unknown credential: err = %v, want bindsec.ErrUnauthenticated", err)
	}
	_, err = adminPlan.Check(ctx, tokAdmin, nil)
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("no authenticator: err = %v, want bindsec.ErrUnauthenticated", err)
	}
	_, err = adminPlan.Check(ctx, tokReader, tokens)
	if !errors.Is(err, bindsec.ErrForbidden) {
		t.Errorf("err = %v, want bindsec.ErrForbidden", err)
	}
	pr, err = adminPlan.Check(ctx, tokAdmin, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if got := pr.Subject(); got != "ada" {
		t.Errorf("pr.Subject() = %q, want \"ada\"", got)
	}
	_, err = bindsec.Plan{Public: true, Roles: []string{"x"}}.Check(ctx, tokAdmin, tokens)
	if !errors.Is(err, bindsec.ErrInvalidPlan) {
		t.Errorf("an invalid plan admits no one: err = %v, want bindsec.ErrInvalidPlan", err)
	}
}
