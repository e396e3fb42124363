package mcpserve_test

import (
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// boundServer serves cat statelessly, with a requestState TTL of ttl and
// a clock that reads the start plus *skew.
func boundServer(t *testing.T, cat *catalog.Catalog, fast bool, ttl time.Duration, skew *atomic.Int64) string {
	t.Helper()
	srv, err := mcpserve.New(cat, mcpserve.Options{Stateless: true, Logger: quietLogger(), RequestStateTTL: ttl})
	require.NoError(t, err)
	start := time.Now()
	mcpserve.SetStateClock(srv, func() time.Time { return start.Add(time.Duration(skew.Load())) })
	if !fast {
		mcpserve.NoFastPath(srv)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); _ = srv.Close() })
	return ts.URL
}

// callWith sends one 2026-07-28 tools/call of name with args, answers and
// state, as alice.
func callWith(t *testing.T, url, name string, args, responses map[string]any, state string) (map[string]any, map[string]any) {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if responses != nil {
		params["inputResponses"] = responses
	}
	if state != "" {
		params["requestState"] = state
	}
	_, res, rpcErr := request2026(t, url, "tools/call", name, "alice", params, map[string]any{"elicitation": map[string]any{}})
	return res, rpcErr
}

// A requestState is good for the retry of the call it was issued for and
// nothing else: the same state with other arguments, on another route, or
// past its TTL is -32602 invalid_request_state, and no body runs; with the
// same arguments, within the TTL, it is answered, as often as the client
// retries. On both paths.
func TestRoundStateBoundToCall(t *testing.T) {
	const ttl = time.Minute
	us := map[string]any{"region": "us"}
	for _, fast := range []bool{true, false} {
		for _, tc := range []struct {
			name  string
			tool  string         // the retry's
			args  map[string]any // the retry's
			skew  time.Duration  // the clock at the retry, past the first round
			valid bool
		}{
			{"same call", "greet", us, 0, true},
			{"same call, last moment", "greet", us, ttl - time.Millisecond, true},
			{"replayed with other arguments", "greet", map[string]any{"region": "eu"}, 0, false},
			{"replayed with an added argument", "greet", map[string]any{"region": "us", "role": "admin"}, 0, false},
			{"replayed with no arguments", "greet", map[string]any{}, 0, false},
			{"rebound to another tool", "other", us, 0, false},
			{"expired", "greet", us, ttl, false},
		} {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, tc.name), func(t *testing.T) {
				cat := newCatalog(t, catalog.Config{})
				var runs, other atomic.Int64
				startGreeter(t, cat, "greet", &runs)
				startGreeter(t, cat, "other", &other)
				var skew atomic.Int64
				url := boundServer(t, cat, fast, ttl, &skew)

				res, rpcErr := callWith(t, url, "greet", us, nil, "")
				require.Nil(t, rpcErr)
				require.Equal(t, "input_required", res["resultType"])
				state, _ := res["requestState"].(string)
				require.NotEmpty(t, state)
				// The first retry, as issued, completes: the state is not
				// single-use, so what follows is a replay.
				res, rpcErr = callWith(t, url, "greet", us, adaAnswer, state)
				require.Nil(t, rpcErr)
				require.Equal(t, "complete", res["resultType"])

				skew.Store(int64(tc.skew))
				before, otherBefore := runs.Load(), other.Load()
				res, rpcErr = callWith(t, url, tc.tool, tc.args, adaAnswer, state)
				if tc.valid {
					require.Nil(t, rpcErr)
					assert.Equal(t, "complete", res["resultType"])
					assert.Contains(t, fmt.Sprint(res["content"]), "Hello, Ada!")
					return
				}
				require.NotNil(t, rpcErr, "result %v", res)
				assert.Equal(t, float64(-32602), rpcErr["code"])
				assert.Equal(t, map[string]any{"reason": "invalid_request_state"}, rpcErr["data"])
				assert.Equal(t, before, runs.Load(), "the asking body ran")
				assert.Equal(t, otherBefore, other.Load(), "the other body ran")
			})
		}
	}
}

// A forwarded call's rounds keep their binding across the hop: the
// holder judges the arguments the forwarding replica passed on, so a
// retry through either replica with the call's arguments completes, and
// one with other arguments is refused.
func TestForwardRoundsBoundToArguments(t *testing.T) {
	stateless := func(o *mcpserve.Options) { o.Stateless = true }
	a, b := newReplica(t, stateless), newReplica(t, stateless)
	var runs atomic.Int64
	startGreeter(t, b.cat, "greet", &runs)
	a.peers.set("tool", "greet", b.fleet)
	args := map[string]any{"region": "us", "n": 1}
	params := map[string]any{"name": "greet", "arguments": args}
	caps := map[string]any{"elicitation": map[string]any{}}
	_, res, rpcErr := request2026(t, a.url, "tools/call", "greet", goodToken, params, caps)
	require.Nil(t, rpcErr)
	state, _ := res["requestState"].(string)
	require.NotEmpty(t, state)
	for _, url := range []string{a.url, b.url} {
		params := map[string]any{"name": "greet", "arguments": args, "inputResponses": adaAnswer, "requestState": state}
		_, res, rpcErr := request2026(t, url, "tools/call", "greet", goodToken, params, caps)
		require.Nil(t, rpcErr, "retry at %s", url)
		assert.Contains(t, fmt.Sprint(res["content"]), "Hello, Ada!")
	}
	params = map[string]any{"name": "greet", "arguments": map[string]any{"region": "eu", "n": 1}, "inputResponses": adaAnswer, "requestState": state}
	_, _, rpcErr = request2026(t, a.url, "tools/call", "greet", goodToken, params, caps)
	require.NotNil(t, rpcErr)
	assert.Equal(t, map[string]any{"reason": "invalid_request_state"}, rpcErr["data"])
	assert.Equal(t, int64(3), runs.Load())
}

// A negative TTL is refused.
func TestRequestStateTTLOption(t *testing.T) {
	_, err := mcpserve.New(newCatalog(t, catalog.Config{}), mcpserve.Options{RequestStateTTL: -time.Second})
	require.ErrorIs(t, err, mcpserve.ErrInvalidOptions)
}
