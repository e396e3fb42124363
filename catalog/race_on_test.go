//go:build race

package catalog_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// code that is allocation-free through a pool allocates now and then.
const raceEnabled = true
