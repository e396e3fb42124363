//go:build race

package strictjson_test

// raceOn: the race detector makes sync.Pool drop what it is given at
// random, so that a count of allocations means nothing.
const raceOn = true
