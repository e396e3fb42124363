package etcdfleet

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lookupOf returns a lookup that knows replica "r" alone, enrolled with
// pub at endpoint.
func lookupOf(pub ed25519.PublicKey, endpoint string) func(string) (enrolled, error) {
	return func(name string) (enrolled, error) {
		if name != "r" {
			return enrolled{}, fmt.Errorf("%w: %s", ErrNotEnrolled, name)
		}
		return enrolled{pub: pub, endpoint: endpoint}, nil
	}
}

// A sealed record opens under its key and lease, by the key enrolled for
// the replica it names at the endpoint enrolled, whatever encoding quirks
// its content has (invalid UTF-8, HTML characters, a schema with spaces),
// and under nothing else.
func TestSealOpen(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	otherPub, otherPriv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	const ep = "http://127.0.0.1:1/fleet"
	rec := Record{Replica: "r", Endpoint: ep, Owner: 42, Kind: "tool",
		Tool: &ToolDesc{Name: "t<1>&", Description: "bad \xff utf-8 \u2028", InputSchema: json.RawMessage(`{ "type" : "object" }`)}}
	val, err := seal(priv, "/p/tools/t", 7, rec)
	require.NoError(t, err)
	got, err := open("/p/tools/t", 7, []byte(val), lookupOf(pub, ep))
	require.NoError(t, err)
	assert.Empty(t, got.Sig)
	assert.Equal(t, uint64(42), got.Owner)
	assert.Equal(t, "t<1>&", got.Tool.Name)

	fromOther, err := seal(otherPriv, "/p/tools/t", 7, rec)
	require.NoError(t, err)
	unknown := rec
	unknown.Replica = "u"
	fromUnknown, err := seal(priv, "/p/tools/t", 7, unknown)
	require.NoError(t, err)
	for what, tc := range map[string]struct {
		key    string
		lease  int64
		val    string
		lookup func(string) (enrolled, error)
		want   error
	}{
		"another key":   {"/p/tools/u", 7, val, lookupOf(pub, ep), errForged},
		"another lease": {"/p/tools/t", 0, val, lookupOf(pub, ep), errForged},
		// A record that names r, signed by another replica's key.
		"another replica's key":       {"/p/tools/t", 7, fromOther, lookupOf(pub, ep), errForged},
		"the enrolled key is another": {"/p/tools/t", 7, val, lookupOf(otherPub, ep), errForged},
		"another enrolled endpoint":   {"/p/tools/t", 7, val, lookupOf(pub, "http://127.0.0.1:2/fleet"), errForged},
		"a replica not enrolled":      {"/p/tools/t", 7, fromUnknown, lookupOf(pub, ep), ErrNotEnrolled},
		"a field renamed to dodge the signature": {"/p/tools/t", 7,
			strings.Replace(val, `"owner":42`, `"owner":42,"ENDPOINT":"http://evil/fleet"`, 1), lookupOf(pub, ep), errForged},
		"no signature":              {"/p/tools/t", 7, strings.Replace(val, `"sig"`, `"gis"`, 1), lookupOf(pub, ep), errForged},
		"a value that is no record": {"/p/tools/t", 7, "5", lookupOf(pub, ep), errInvalidRecord},
	} {
		_, err := open(tc.key, tc.lease, []byte(tc.val), tc.lookup)
		assert.ErrorIs(t, err, tc.want, what)
	}
	_, err = open("/p/tools/t", 7, []byte(fromOther), lookupOf(otherPub, ep))
	assert.NoError(t, err, "the control: the other key's record under its own enrollment")
}

// An enrollment verifies under the authority of the token that signed it
// or of a previous token, for the key it was signed for alone; a public
// key of the wrong size, a copy under another name and another fleet's
// authority are refused with errBadEnrollment.
func TestOpenEnrollment(t *testing.T) {
	const tok, newer = "fleet-token-0123456789abcdef", "a-newer-token-0123456789"
	old, err := newAuthority(tok, nil)
	require.NoError(t, err)
	pub, _, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	key, val, err := old.enroll("/p", "r", pub, "http://127.0.0.1:1/fleet")
	require.NoError(t, err)
	rotating, err := newAuthority(newer, []string{tok})
	require.NoError(t, err)
	for _, a := range []authority{old, rotating} {
		e, err := a.openEnrollment(key, []byte(val), DefaultPeerPath, peers{any: true})
		require.NoError(t, err)
		assert.Equal(t, "r", e.Replica)
		assert.Equal(t, []byte(pub), e.Key)
	}
	stranger, err := newAuthority(newer, nil)
	require.NoError(t, err)
	var short enrollment
	require.NoError(t, json.Unmarshal([]byte(val), &short))
	short.Key = short.Key[:16]
	shortVal, err := json.Marshal(short)
	require.NoError(t, err)
	for what, tc := range map[string]struct {
		a        authority
		key, val string
	}{
		"another fleet's authority": {stranger, key, val},
		"copied under another name": {old, enrollKey("/p", "s"), val},
		"a public key of 16 bytes":  {old, key, string(shortVal)},
		"not JSON":                  {old, key, "{"},
	} {
		_, err := tc.a.openEnrollment(tc.key, []byte(tc.val), DefaultPeerPath, peers{any: true})
		assert.ErrorIs(t, err, errBadEnrollment, what)
	}
	_, err = old.openEnrollment(key, []byte(shortVal), DefaultPeerPath, peers{any: true})
	assert.ErrorContains(t, err, "a public key of 16 bytes")
}

// BenchmarkVerifyRecord is the follower's cost to admit one record of a
// typical size: decode, re-encode, one Ed25519 verification. It is paid
// once per record listed or watched, never on a call.
func BenchmarkVerifyRecord(b *testing.B) {
	rec := Record{Replica: "r", Endpoint: "http://10.0.0.5:8931/fleet", Owner: 12345, Kind: "tool",
		Tool: &ToolDesc{Name: "search", Title: "Search", Description: "Searches the index for documents that match a query.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"the query"}},"required":["q"]}`)}}
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(b, err)
	val, err := seal(priv, "/p/tools/search", 99, rec)
	require.NoError(b, err)
	raw := []byte(val)
	lookup := lookupOf(pub, rec.Endpoint)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := open("/p/tools/search", 99, raw, lookup); err != nil {
			b.Fatal(err)
		}
	}
}
