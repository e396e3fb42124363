// Package spread picks the stripe of a striped counter for the calling
// goroutine, for the counters that every call or write of livereg updates
// (catalog's admission gate and call counts, shardreg's write sections).
//
// A stripe is chosen by the address of the caller's stack: goroutines
// running at once have different stacks, so they mostly land on different
// stripes, and a goroutine keeps its stripe (and its cache line) for as long
// as its stack stays where it is. The pick costs a multiply, where a random
// number costs a few nanoseconds and loses that affinity. Two goroutines
// share a stripe with a chance of one in the stripe count, hence Count's
// stripes per core.
package spread

import (
	"math/bits"
	"runtime"
	"unsafe"
)

// Hash hashes the address of the caller's stack frame. Stacks are spans of
// at least 2 KiB, so the bits below that carry little; a Fibonacci multiply
// spreads the rest into the top bits. Mask its result with a power of two
// less one. Safe for concurrent use; it reads no shared memory.
//
//go:nosplit
func Hash() uint32 {
	var here byte
	return uint32((uint64(uintptr(unsafe.Pointer(&here))>>11) * 0x9E3779B97F4A7C15) >> 32)
}

// Count returns perCore stripes for each of GOMAXPROCS, rounded up to a
// power of two, and at most limit (itself a power of two).
func Count(perCore, limit int) int {
	return min(1<<bits.Len(uint(perCore*runtime.GOMAXPROCS(0)-1)), limit)
}
