package cli

import (
	"flag"
	"fmt"
	"time"
)

// Common is the settings both worlds take under the same flags. Each
// world's Config embeds it, so that cfg.Consumers reads the same in both.
type Common struct {
	Duration  time.Duration // the load phase
	Seed      uint64        // seed of every worker's random choices; 0 draws one
	Consumers int           // goroutines starting and ending consumers
	Resolvers int           // goroutines calling and listing
	Names     int           // the pool of tool names the consumers draw from
	Hold      time.Duration // longest a consumer is kept before it is ended
	JSONPath  string        // write the report as JSON here; "-" for stdout
}

// Help is what the common flags mean in one world, for its -h.
type Help struct {
	Duration, Seed, Consumers, Resolvers, Names, Hold string
}

// Flags registers the common flags on fs, parsed into c, c's values as
// their defaults (the seed's is 0: draw one).
func (c *Common) Flags(fs *flag.FlagSet, h Help) {
	fs.DurationVar(&c.Duration, "duration", c.Duration, h.Duration)
	fs.Uint64Var(&c.Seed, "seed", 0, h.Seed)
	fs.IntVar(&c.Consumers, "consumers", c.Consumers, h.Consumers)
	fs.IntVar(&c.Resolvers, "resolvers", c.Resolvers, h.Resolvers)
	fs.IntVar(&c.Names, "names", c.Names, h.Names)
	fs.DurationVar(&c.Hold, "hold", c.Hold, h.Hold)
	fs.StringVar(&c.JSONPath, "json", "", "also write the report as JSON to `FILE` (\"-\" for stdout)")
}

// Validate reports the first common setting out of range: consumers and
// resolvers from 1 to maxWorkers each, names from 1 to maxNames, and a
// hold of 0 or more. What a world accepts as -duration is its own check.
func (c Common) Validate(maxWorkers, maxNames int) error {
	switch {
	case c.Resolvers < 1 || c.Resolvers > maxWorkers:
		return fmt.Errorf("-resolvers %d: want 1 to %d", c.Resolvers, maxWorkers)
	case c.Consumers < 1 || c.Consumers > maxWorkers:
		return fmt.Errorf("-consumers %d: want 1 to %d", c.Consumers, maxWorkers)
	case c.Names < 1 || c.Names > maxNames:
		return fmt.Errorf("-names %d: want 1 to %d", c.Names, maxNames)
	case c.Hold < 0:
		return fmt.Errorf("-hold %v: want 0 or more", c.Hold)
	}
	return nil
}
