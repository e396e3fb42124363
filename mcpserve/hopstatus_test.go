package mcpserve_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// A holder that answers a forward with an HTTP error, not a JSON-RPC
// answer, gives CodePeerUnavailable whose data carries its status: a hop
// the holder refused (401: here its signature stripped on the way) is
// told from a full nonce cache (503) and from a holder that could not be
// reached (no status), by the caller alone, without the forwarder's log.
func TestForwardNamesTheHoldersStatus(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	startText(t, b.cat, context.Background(), "stripped", "never")
	peer, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calling(r, "full") {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Service Unavailable: the hop's nonces are full", http.StatusServiceUnavailable)
			return
		}
		r.Header.Del("Livereg-Fleet-Signature")
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	a.peers.set("tool", "stripped", peer+"/fleet")
	a.peers.set("tool", "full", peer+"/fleet")
	a.peers.set("tool", "down", "http://127.0.0.1:1/fleet")
	c := connectTo(t, a.url, goodToken)
	for _, tc := range []struct {
		name      string
		status    any // nil: none in the data
		retryable bool
	}{
		{"stripped", float64(http.StatusUnauthorized), false},
		{"full", float64(http.StatusServiceUnavailable), false},
		{"down", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := callWithin(t, c, tc.name, hangGuard)
			require.Equal(t, mcpserve.CodePeerUnavailable, rpcCode(err), "%v", err)
			d := rpcData(err)
			require.Equal(t, "peer_unavailable", d["reason"])
			require.Equal(t, tc.retryable, d["retryable"])
			require.Equal(t, tc.status, d["status"])
		})
	}
}
