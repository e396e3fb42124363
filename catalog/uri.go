package catalog

import (
	"errors"
	"fmt"
)

// DefaultMaxURIBytes is the default of Config.MaxURIBytes: well above any
// real resource URI (registry names stop at 4 KiB), and a bound on what a
// templated read costs (see ReadURI).
const DefaultMaxURIBytes = 8 << 10

// ErrURITooLong: a URI a client asked for is longer than
// Config.MaxURIBytes. Nothing was looked up or matched. MCP answers it
// with JSON-RPC error -32602.
var ErrURITooLong = errors.New("catalog: URI too long")

// maxURI resolves Config.MaxURIBytes: 0 is the default, negative none.
func maxURI(n int) int {
	switch {
	case n == 0:
		return DefaultMaxURIBytes
	case n < 0:
		return -1
	}
	return n
}

// checkURI refuses a URI beyond the catalog's limit before any lookup or
// match; it costs a length comparison.
func (c *Catalog) checkURI(uri string) error {
	if c.maxURI >= 0 && len(uri) > c.maxURI {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrURITooLong, len(uri), c.maxURI)
	}
	return nil
}

// MaxURIBytes returns the longest URI the catalog reads, subscribes or
// completes (Config.MaxURIBytes resolved); -1 means no limit.
func (c *Catalog) MaxURIBytes() int { return c.maxURI }
