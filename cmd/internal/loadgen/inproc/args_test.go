package inproc

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.True(t, fastDecodeArgs(raw, &fast), "%s", raw)
		assert.Equal(t, want, fast)

		// A client may re-encode the object: other order, spaces.
		re, err := json.MarshalIndent(map[string]any{"probe": want.Probe, "cred": want.Cred, "seq": want.Seq, "panic": want.Panic}, "", " ")
		require.NoError(t, err)
		var slow callArgs
		require.False(t, fastDecodeArgs(re, &slow))
		require.NoError(t, decodeArgs(re, &slow))
		assert.Equal(t, want, slow)
	}
	var a callArgs
	for _, bad := range []string{``, `{`, `{"seq":}`, `{"seq":1,"cred":"x`, `{"seq":1,"cred":"x"}}`, `[1]`} {
		assert.False(t, fastDecodeArgs([]byte(bad), &a), bad)
	}
	assert.Error(t, decodeArgs([]byte(`{"seq":"x"}`), &a))
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
