package main

import (
	"errors"
	"flag"
	"runtime/debug"
	"strconv"
)

// The garbage collector's settings are a choice livereg-mcp makes rather
// than Go's defaults. Serving MCP over HTTP allocates about 200 KB a call
// (the SDK's JSON decoding most of it) against a live heap of a few MB, so
// at Go's GOGC=100 the collector runs hundreds of times a second near the
// 4 MB minimum heap. In one run of BenchmarkWireCall/impl=livereg (the in-process
// benchmark make bench-wire has since replaced; 2 cores, five rounds interleaved; docs/livereg-mcp.md) a call took 288 µs
// at GOGC=100, 178 at 200, 156 at 400 and 150 at 800: 400 is the knee,
// for a heap that may grow to five times the live one, tens of MB for the
// default caps (1,000 sessions at about 15 KB each). The collector off
// under a 256 MiB limit took 264 µs: a heap that grows to the limit
// between collections misses the caches. A memory limit stays available
// as a ceiling for a container, off by default. Since mcpserve's fast path
// took the hot methods off the SDK's path (6 KB a call), GOGC no longer
// moves a fast-path call's time beyond the noise and 400 costs about
// 12 MiB of RSS over 100 (docs/livereg-mcp.md, "Garbage collection"); it
// stays for the sessions the SDK still serves.
const defaultGCPercent = 400

// gcConfig is the garbage collector's settings: the flags, overridden by
// $GOGC and $GOMEMLIMIT where set, as the Go runtime reads them.
type gcConfig struct {
	gcPercent        int   // -gc-percent
	memoryLimitBytes int64 // -memory-limit-mib in bytes; 0: none
}

func (c *gcConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.gcPercent, "gc-percent", defaultGCPercent,
		"garbage collection target, as GOGC: the heap grows this many percent over the live heap between collections (negative: off); $GOGC wins when set")
	fs.Func("memory-limit-mib", "soft memory limit of the Go runtime in MiB, as GOMEMLIMIT (default none); $GOMEMLIMIT wins when set",
		func(s string) error {
			mib, err := strconv.ParseInt(s, 10, 64)
			if err != nil || mib <= 0 || mib > 1<<40 {
				return errors.New("-memory-limit-mib takes a positive whole number of MiB")
			}
			c.memoryLimitBytes = mib << 20
			return nil
		})
}

// applyGC sets the collector from c, except what the environment already
// set (getenv reads it); gcPercent and memoryLimit are debug's setters,
// which tests replace.
func applyGC(c gcConfig, getenv func(string) string, gcPercent func(int) int, memoryLimit func(int64) int64) {
	if getenv("GOGC") == "" {
		gcPercent(c.gcPercent)
	}
	if getenv("GOMEMLIMIT") == "" && c.memoryLimitBytes > 0 {
		memoryLimit(c.memoryLimitBytes)
	}
}

// setGC applies c to this process.
func setGC(c gcConfig, getenv func(string) string) {
	applyGC(c, getenv, debug.SetGCPercent, debug.SetMemoryLimit)
}
