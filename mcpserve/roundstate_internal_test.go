package mcpserve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// argsDigest hashes what the arguments say, not how they are spelled: a
// forwarding replica or another client library may re-encode them.
func TestArgsDigest(t *testing.T) {
	raw := func(s string) callArgs { return callArgs{raw: json.RawMessage(s)} }
	base := argsDigest(raw(`{"a":1,"b":[true,"x"]}`))
	for _, tc := range []struct {
		name string
		args callArgs
		same bool
	}{
		{"key order and spacing", raw(` { "b" : [ true , "x" ] , "a" : 1 } `), true},
		{"escaped key", raw(`{"\u0061":1,"b":[true,"x"]}`), true},
		{"other value", raw(`{"a":2,"b":[true,"x"]}`), false},
		{"other number spelling", raw(`{"a":1.0,"b":[true,"x"]}`), false},
		{"case-variant key", raw(`{"A":1,"b":[true,"x"]}`), false},
		{"added key", raw(`{"a":1,"b":[true,"x"],"c":null}`), false},
		{"trailing data", raw(`{"a":1,"b":[true,"x"]} x`), false},
	} {
		assert.Equal(t, tc.same, argsDigest(tc.args) == base, tc.name)
	}
	empty := argsDigest(callArgs{})
	for _, a := range []callArgs{raw(``), raw(`null`), raw(`{}`), raw(" {} "), {prompt: map[string]string{}}} {
		assert.Equal(t, empty, argsDigest(a), "%#v", a)
	}
	assert.Equal(t, argsDigest(callArgs{prompt: map[string]string{"x": "1", "y": "2"}}), argsDigest(raw(`{"y":"2","x":"1"}`)))
	assert.NotEqual(t, empty, argsDigest(raw(`[]`)))
}
