package bindsec

import "time"

// WithClock replaces time.Now in a book, so that expiry can be tested at
// the exact instant a principal expires. It is reachable only from tests.
func WithClock(now func() time.Time) Option { return withClock(now) }

// MinSweepEvery is the fewest registrations between two sweeps of a book.
const MinSweepEvery = minSweepEvery
