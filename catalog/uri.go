package catalog

import "fmt"

// defaultMaxURIBytes is the default of Config.MaxURIBytes: well above any
// real resource URI (registry names stop at 4 KiB), and a bound on what a
// templated read costs (see ReadResource).
const defaultMaxURIBytes = 8 << 10

// maxURI resolves Config.MaxURIBytes: 0 is the default, negative none.
func maxURI(n int) int {
	switch {
	case n == 0:
		return defaultMaxURIBytes
	case n < 0:
		return -1
	}
	return n
}

// checkURI refuses a URI beyond the catalog's limit before any lookup or
// match, with ErrInvalidArguments (MCP: -32602); it costs a length
// comparison.
func (c *Catalog) checkURI(uri string) error {
	if c.maxURI >= 0 && len(uri) > c.maxURI {
		return fmt.Errorf("%w: the URI has %d bytes, at most %d", ErrInvalidArguments, len(uri), c.maxURI)
	}
	return nil
}

// MaxURIBytes returns the longest URI the catalog reads, subscribes or
// completes (Config.MaxURIBytes resolved); -1 means no limit.
func (c *Catalog) MaxURIBytes() int { return c.maxURI }
