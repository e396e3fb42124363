//go:build !race

package mcpserve_test

// slowdown is how much slower the race detector makes decoding a large
// request: timing bounds are multiplied by it.
const slowdown = 1
