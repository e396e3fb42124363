package inproc

import (
	"encoding/json"
	"testing"
)

// decodeArgs reads back whatever encodeArgs wrote, by its fast path, and
// the same arguments re-encoded by a client, by encoding/json.
func TestDecodeArgs(t *testing.T) {
	for _, want := range []callArgs{
		{Seq: 1, Cred: credValid.String()},
		{Seq: 18446744073709551615, Cred: credBogus.String(), Panic: 7},
		{Seq: 42, Cred: credNone.String(), Probe: 9},
		{Seq: 3, Cred: credExpired.String(), Panic: 1, Probe: 2},
	} {
		raw := encodeArgs(want.Seq, credOf(t, want.Cred), want.Panic, want.Probe)
		var fast callArgs
		if !fastDecodeArgs(raw, &fast) {
			t.Fatalf("%s: fastDecodeArgs(raw, &fast) = %v, want %v", raw, false, true)
		}
		if got, want := fast, want; got != want {
			t.Errorf("fast = %v, want %v", got, want)
		}

		// A client may re-encode the object: other order, spaces.
		re, err := json.MarshalIndent(map[string]any{"probe": want.Probe, "cred": want.Cred, "seq": want.Seq, "panic": want.Panic}, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		var slow callArgs
		if fastDecodeArgs(re, &slow) {
			t.Fatalf("fastDecodeArgs(re, &slow) = %v, want %v", true, false)
		}
		if err := decodeArgs(re, &slow); err != nil {
			t.Fatalf("decodeArgs(re, &slow): %v", err)
		}
		if got, want := slow, want; got != want {
			t.Errorf("slow = %v, want %v", got, want)
		}
	}
	var a callArgs
	for _, bad := range []string{``, `{`, `{"seq":}`, `{"seq":1,"cred":"x`, `{"seq":1,"cred":"x"}}`, `[1]`} {
		if fastDecodeArgs([]byte(bad), &a) {
			t.Errorf("%v: fastDecodeArgs([]byte(bad), &a) = %v, want %v", bad, true, false)
		}
	}
	if decodeArgs([]byte(`{"seq":"x"}`), &a) == nil {
		t.Errorf("decodeArgs([]byte(`{\"seq\":\"x\"}`), &a) = nil, want an error")
	}
}

func credOf(t *testing.T, s string) credClass {
	for c := range numCreds {
		if c.String() == s {
			return c
		}
	}
	t.Fatalf("no credClass %q", s)
	return 0
}
