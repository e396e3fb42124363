package mcpserve

import (
	"errors"
	"sync"
	"time"
)

// defaultMaxHopNonces is Fleet.MaxHopNonces' default: at some 60 bytes a
// nonce, about 60 MiB at most, which holds a replay window of 30 s at
// some 17,000 forwarded requests a second.
const defaultMaxHopNonces = 1 << 20

// nonceShards spreads the nonce cache's lock.
const nonceShards = 16

// errNoncesFull: the nonces seen within the replay window fill the cache.
// The request is refused (503), not its nonce forgotten: forgetting one
// would let its request be replayed.
var errNoncesFull = errors.New("too many fleet requests within the replay window; retry later")

// nonceCache remembers the nonces of the hop requests a holder took,
// each until its timestamp leaves the replay window (after which the
// timestamp alone refuses it), in at most limit entries: a flood of signed
// requests (only a verified request's nonce is recorded) fills it, and
// then requests are refused until the window passes, rather than nonces
// forgotten. Safe for concurrent use; add costs a lock of one shard of
// sixteen, and, on a full shard, a sweep of its expired nonces, at most
// once per sixteenth of the window.
type nonceCache struct {
	perShard int
	every    time.Duration // between sweeps of a full shard
	shards   [nonceShards]nonceShard
}

type nonceShard struct {
	mu    sync.Mutex
	until map[[hopNonceBytes]byte]int64 // nonce -> when it may be forgotten, Unix ns
	swept int64                         // last sweep, Unix ns
	_     [40]byte                      // keeps shards' locks on cache lines of their own
}

func newNonceCache(limit int, window time.Duration) *nonceCache {
	c := &nonceCache{perShard: max(limit/nonceShards, 1), every: window / nonceShards}
	for i := range c.shards {
		c.shards[i].until = map[[hopNonceBytes]byte]int64{}
	}
	return c
}

// add records nonce until the given time, at now: errHopReplayed when it
// is there already, errNoncesFull when its shard is full of nonces
// within the window.
func (c *nonceCache) add(nonce [hopNonceBytes]byte, until, now time.Time) error {
	sh := &c.shards[nonce[0]%nonceShards]
	n := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if u, ok := sh.until[nonce]; ok && u >= n {
		return errHopReplayed
	}
	if len(sh.until) >= c.perShard {
		if n-sh.swept < int64(c.every) {
			return errNoncesFull
		}
		sh.swept = n
		for k, u := range sh.until {
			if u < n {
				delete(sh.until, k)
			}
		}
		if len(sh.until) >= c.perShard {
			return errNoncesFull
		}
	}
	sh.until[nonce] = until.UnixNano()
	return nil
}

// size is how many nonces the cache holds.
func (c *nonceCache) size() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.until)
		sh.mu.Unlock()
	}
	return n
}
