package mcpserve

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A nonce is refused again within its window; a full cache refuses new
// nonces rather than forget one, and takes them again once the window of
// those it holds has passed.
func TestNonceCacheRefusesWhenFull(t *testing.T) {
	const window = 30 * time.Second
	c := newNonceCache(nonceShards, window) // one nonce a shard
	t0 := time.Unix(1_800_000_000, 0)
	n1, n2 := [hopNonceBytes]byte{0, 1}, [hopNonceBytes]byte{0, 2} // one shard
	require.NoError(t, c.add(n1, t0.Add(window), t0))
	require.ErrorIs(t, c.add(n1, t0.Add(window), t0.Add(time.Second)), errHopReplayed)
	require.ErrorIs(t, c.add(n2, t0.Add(window+time.Second), t0.Add(time.Second)), errNoncesFull)
	require.ErrorIs(t, c.add(n1, t0.Add(window), t0.Add(window)), errHopReplayed, "still within its window")
	require.Equal(t, 1, c.size())
	// Past n1's window: swept, and n2 is taken.
	later := t0.Add(window + time.Millisecond)
	require.NoError(t, c.add(n2, later.Add(window), later))
	require.Equal(t, 1, c.size())
	// Another shard has room of its own.
	require.NoError(t, c.add([hopNonceBytes]byte{1}, later.Add(window), later))
}

// Concurrent adds of the same nonces take each exactly once.
func TestNonceCacheConcurrent(t *testing.T) {
	const (
		workers = 8
		nonces  = 200
	)
	c := newNonceCache(defaultMaxHopNonces, defaultReplayWindow)
	now := time.Now()
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range nonces {
				n := [hopNonceBytes]byte{byte(i), byte(i >> 8)}
				switch err := c.add(n, now.Add(defaultReplayWindow), now); {
				case err == nil:
					taken.Add(1)
				default:
					require.ErrorIs(t, err, errHopReplayed)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, nonces, taken.Load())
	require.Equal(t, nonces, c.size())
}
