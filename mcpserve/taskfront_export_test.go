package mcpserve

import "time"

// SetListenExpiry replaces the timer a task listen stops at when its
// credential expires, and returns what restores it. Not for parallel
// tests.
func SetListenExpiry(f func(d time.Duration) (<-chan time.Time, func() bool)) (restore func()) {
	old := listenExpiry
	listenExpiry = f
	return func() { listenExpiry = old }
}
