package mcpserve

import "github.com/livereg/livereg/catalog"

// NewWithWindow is New with the coalescing wait replaced, so that a test
// decides when a window ends.
func NewWithWindow(cat *catalog.Catalog, opts Options, window func(stop <-chan struct{}) bool) (*Server, error) {
	return newServer(cat, opts, window)
}
