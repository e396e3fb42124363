package shardreg

import (
	"fmt"
	"math"
)

// DefaultCap is the cap of a registry made without WithCap: the default of
// the reference MCP server that ADR-0068 was written for.
const DefaultCap = 128

// NoCap, given to WithCap, makes a registry without a practical cap.
const NoCap = math.MaxInt

// An Option configures a Registry in New.
type Option func(*config) error

type config struct {
	cap      int64
	validate func(string) error
}

// WithCap sets the catalog cap: the most entries, dead ones not yet swept
// included, that the registry holds. n must be at least 1.
func WithCap(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: cap %d, want at least 1", ErrInvalidOption, n)
		}
		c.cap = int64(n)
		return nil
	}
}

// WithValidator adds a check that every registered name must pass, on top of
// the built-in ones (non-empty, valid UTF-8, at most MaxNameLen bytes). A
// name it refuses gets ErrInvalidName wrapping the validator's error. The
// function is called concurrently and must not block. See [ToolName] and
// [ResourceURI].
func WithValidator(fn func(name string) error) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("%w: nil validator", ErrInvalidOption)
		}
		c.validate = fn
		return nil
	}
}
