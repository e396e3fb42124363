package mcpserve_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// A holder that answers a forward with an HTTP error, not a JSON-RPC
// answer, gives CodePeerUnavailable whose data carries its status: a hop
// the holder refused (401: here its signature stripped on the way) is
// told from a full nonce cache (503) and from a holder that could not be
// reached (no status), by the caller alone, without the forwarder's log.
// A refused hop ran nothing, so it is retryable, and the forwarder has
// sent it once more, signed anew, before it answers: a holder whose view
// had not yet seen the forwarder's enrollment (a replica that just
// joined) serves the second.
func TestForwardNamesTheHoldersStatus(t *testing.T) {
	a, b := newReplica(t), newReplica(t, behindProxy)
	startText(t, b.cat, context.Background(), "stripped", "never")
	startText(t, b.cat, context.Background(), "late", "enrolled")
	var hits [3]atomic.Int32 // stripped, full, late
	peer, _ := peerServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case calling(r, "full"):
			hits[1].Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Service Unavailable: the hop's nonces are full", http.StatusServiceUnavailable)
			return
		case calling(r, "stripped"):
			hits[0].Add(1)
			r.Header.Del("Livereg-Fleet-Signature")
		case calling(r, "late"):
			if hits[2].Add(1) == 1 {
				r.Header.Del("Livereg-Fleet-Signature")
			}
		}
		b.srv.FleetHandler().ServeHTTP(w, r)
	}))
	for _, name := range []string{"stripped", "full", "late"} {
		a.peers.set("tool", name, peer+"/fleet")
	}
	a.peers.set("tool", "down", "http://127.0.0.1:1/fleet")
	c := connectTo(t, a.url, goodToken)
	for _, tc := range []struct {
		name   string
		status any // nil: none in the data
		sent   *atomic.Int32
	}{
		{"stripped", float64(http.StatusUnauthorized), &hits[0]},
		{"full", float64(http.StatusServiceUnavailable), &hits[1]},
		{"down", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := callWithin(t, c, tc.name, hangGuard)
			require.Equal(t, mcpserve.CodePeerUnavailable, rpcCode(err), "%v", err)
			d := rpcData(err)
			require.Equal(t, "peer_unavailable", d["reason"])
			require.Equal(t, true, d["retryable"])
			require.Equal(t, tc.status, d["status"])
			if tc.sent != nil {
				assert.Equal(t, int32(2), tc.sent.Load(), "sent once, and once more")
			}
		})
	}
	t.Run("late", func(t *testing.T) {
		res, _, err := callWithin(t, c, "late", hangGuard)
		require.NoError(t, err)
		require.Len(t, res.Content, 1)
		assert.Equal(t, "enrolled", res.Content[0].(*mcp.TextContent).Text)
		assert.Equal(t, int32(2), hits[2].Load())
	})
}
