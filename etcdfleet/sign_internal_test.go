package etcdfleet

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const testToken = "fleet-token-0123456789abcdef"

// A sealed record opens under its key and lease, whatever encoding
// quirks its content has (invalid UTF-8, HTML characters, a schema with
// spaces), and under nothing else.
func TestSealOpen(t *testing.T) {
	ks, err := newMACKeys(testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := Record{Replica: "r<1>&", Endpoint: "http://127.0.0.1:1/fleet", Owner: 42, Kind: "tool",
		Tool: &ToolDesc{Name: "t", Description: "bad \xff utf-8 \u2028", InputSchema: json.RawMessage(`{ "type" : "object" }`)}}
	val, err := ks.seal("/p/tools/t", 7, rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ks.open("/p/tools/t", 7, []byte(val))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got.MAC != "" || got.Owner != 42 || got.Tool.Name != "t" {
		t.Fatalf("opened %+v", got)
	}
	for what, f := range map[string]func() error{
		"another key":   func() error { _, err := ks.open("/p/tools/u", 7, []byte(val)); return err },
		"another lease": func() error { _, err := ks.open("/p/tools/t", 0, []byte(val)); return err },
		"another token": func() error {
			other, _ := newMACKeys("another-token-0123456789", nil)
			_, err := other.open("/p/tools/t", 7, []byte(val))
			return err
		},
		"a field renamed to dodge the MAC": func() error {
			_, err := ks.open("/p/tools/t", 7, []byte(strings.Replace(val, `"owner":42`, `"owner":42,"ENDPOINT":"http://evil/fleet"`, 1)))
			return err
		},
	} {
		if err := f(); !errors.Is(err, errForged) {
			t.Errorf("%s: %v, want errForged", what, err)
		}
	}
	if _, err := ks.open("/p/tools/t", 7, []byte("5")); !errors.Is(err, errInvalidRecord) {
		t.Errorf("a value that is no record: %v", err)
	}
}

// BenchmarkVerifyRecord is the follower's cost to admit one record of a
// typical size: decode, re-encode, one HMAC-SHA256 (two with a previous
// token that signed it). It is paid once per record listed or watched,
// never on a call.
func BenchmarkVerifyRecord(b *testing.B) {
	rec := Record{Replica: "replica-1", Endpoint: "http://10.0.0.5:8931/fleet", Owner: 12345, Kind: "tool",
		Tool: &ToolDesc{Name: "search", Title: "Search", Description: "Searches the index for documents that match a query.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"the query"}},"required":["q"]}`)}}
	for _, tc := range []struct {
		name    string
		signer  string
		current string
		prev    []string
	}{
		{"current", testToken, testToken, nil},
		{"previous", testToken, "a-newer-token-0123456789", []string{testToken}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			signer, _ := newMACKeys(tc.signer, nil)
			val, err := signer.seal("/p/tools/search", 99, rec)
			if err != nil {
				b.Fatal(err)
			}
			ks, _ := newMACKeys(tc.current, tc.prev)
			raw := []byte(val)
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := ks.open("/p/tools/search", 99, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
