package fleet

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/cli"
)

// Config is one fleet run's settings. Start from DefaultConfig.
type Config struct {
	// Common: consumers start and end consumers on random replicas, and
	// resolvers call and list through random replicas, on a pool of
	// names shared by the whole fleet.
	cli.Common
	Fleet int // replicas
	// Etcd lists a real cluster's client URLs; empty runs an embedded
	// single-node etcd in a temporary directory.
	Etcd []string
	TTL  time.Duration // every replica's lease TTL
	// ChaosEvery is the time between one replica failure's end and the
	// next (a revoked lease, a crash, a cut from etcd, in turn); 0 makes
	// none.
	ChaosEvery time.Duration
	// ConvergeBound is invariant 4's bound; FreeSlack is what invariant 5
	// allows beyond the TTL.
	ConvergeBound time.Duration
	FreeSlack     time.Duration
	// Forge runs the forger: records no replica signed, written into
	// etcd during the run, which no replica may list or follow
	// (invariant 8).
	Forge bool
	// Taskers are goroutines that call tools as tasks through random
	// replicas and read them through the others (invariants 9 and 10).
	Taskers int
	// SurfaceConsumers start prompt, resource template and fixed resource
	// consumers; Subscribers subscribe to the fixed resources through
	// other replicas (invariant 11).
	SurfaceConsumers int
	Subscribers      int
}

// DefaultConfig is sized for a 2-core machine.
func DefaultConfig() Config {
	return Config{
		Common: cli.Common{Duration: 10 * time.Second, Consumers: 8, Resolvers: 4, Names: 8, Hold: 50 * time.Millisecond},
		Fleet:  3, TTL: time.Second, ChaosEvery: time.Second,
		ConvergeBound: 100 * time.Millisecond, FreeSlack: 500 * time.Millisecond,
		Forge: true, Taskers: 2, SurfaceConsumers: 4, Subscribers: 2,
	}
}

// UsageLine is printed with every flag error.
const UsageLine = "usage: loadgen -fleet N [-duration 10s] [-etcd URL[,URL...]] [-fleet-ttl 1s] [-chaos-every 1s] [-consumers N] [-resolvers N] [-names K] [-hold D] [-seed N] [-taskers N] [-surface N] [-subscribers N] [-forge=false] [-json FILE]"

// FleetArg finds -fleet N (or --fleet, or -fleet=N) in args, as cmd/loadgen
// dispatches on it: ok reports whether the flag is there, n is its value
// (-1 when it is missing or not a number: ParseArgs then says why), and
// rest is args without it.
func FleetArg(args []string) (n int, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "fleet" {
			continue
		}
		rest = append(append([]string(nil), args[:i]...), args[i+1:]...)
		if !hasVal {
			if i+1 >= len(args) {
				return -1, rest, true
			}
			val = args[i+1]
			rest = append(append([]string(nil), args[:i]...), args[i+2:]...)
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			n = -1
		}
		return n, rest, true
	}
	return 0, args, false
}

// ParseArgs parses a fleet run's arguments, -fleet included. It writes the
// help to w for -h (returning flag.ErrHelp).
func ParseArgs(args []string, w io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("loadgen -fleet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&cfg.Fleet, "fleet", cfg.Fleet, "replicas to run in this process, each with its own etcd client, catalog, MCP server and clients")
	cfg.Common.Flags(fs, cli.Help{
		Duration:  "how long the load phase lasts",
		Seed:      "seed of every worker's random choices (0: pick one and print it)",
		Consumers: "goroutines that start consumers on random replicas and end them by a death shape",
		Resolvers: "goroutines that call and list tools through random replicas' MCP clients",
		Names:     "the shared pool of tool names; fewer names mean more collisions across replicas",
		Hold:      "longest time a consumer is kept before it is ended",
	})
	etcd := fs.String("etcd", "", "`URL[,URL...]` of a real etcd cluster; empty runs an embedded single-node etcd in a temporary directory")
	fs.DurationVar(&cfg.TTL, "fleet-ttl", cfg.TTL, "every replica's lease TTL, whole seconds: how long a crashed replica's names stay claimed")
	fs.DurationVar(&cfg.ChaosEvery, "chaos-every", cfg.ChaosEvery, "time between one replica failure's end and the next, in turn a revoked lease, a crash and a cut from etcd (the last two take a TTL or more); 0 for none")
	fs.IntVar(&cfg.Taskers, "taskers", cfg.Taskers, "goroutines that call tools as tasks through random replicas and read each task through the others until it ends")
	fs.IntVar(&cfg.SurfaceConsumers, "surface", cfg.SurfaceConsumers, "goroutines that start prompt, resource template and fixed resource consumers on random replicas and end them by a death shape")
	fs.IntVar(&cfg.Subscribers, "subscribers", cfg.Subscribers, "goroutines that subscribe, through another replica, to fixed resources that publish updates")
	fs.BoolVar(&cfg.Forge, "forge", cfg.Forge, "write forged records (unsigned, altered, copied, invalid) into etcd during the run, pointing at a trap listener, and check that no replica lists or follows them")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(w, "loadgen -fleet runs N replicas of a livereg fleet in one process over etcd,\n"+
				"drives calls and listings through random replicas while consumers collide\n"+
				"across replicas and die, replicas crash and lose their sessions, and checks\n"+
				"the fleet's invariants (package cmd/internal/loadgen/fleet).\n"+
				"Exit status: 0 no violations, 1 violations or errors, 2 bad flags, 3 interrupted.\n\n%s\n\n", UsageLine)
			fs.SetOutput(w)
			fs.PrintDefaults()
		}
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (flags of the single-process loadgen do not apply with -fleet)", fs.Arg(0))
	}
	if *etcd != "" {
		cfg.Etcd = strings.Split(*etcd, ",")
	}
	return cfg, cfg.Validate()
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	switch {
	case c.Fleet < 1 || c.Fleet > 64:
		return fmt.Errorf("-fleet %d: want 1 to 64", c.Fleet)
	case c.Duration <= 0:
		return fmt.Errorf("-duration %v: want a positive duration", c.Duration)
	}
	if err := c.Common.Validate(1024, 10000); err != nil {
		return err
	}
	switch {
	case c.TTL < time.Second || c.TTL%time.Second != 0:
		return fmt.Errorf("-fleet-ttl %v: want whole seconds, at least 1s", c.TTL)
	case c.ChaosEvery < 0:
		return fmt.Errorf("-chaos-every %v: want 0 or more", c.ChaosEvery)
	case c.Taskers < 0 || c.Taskers > 1024:
		return fmt.Errorf("-taskers %d: want 0 to 1024", c.Taskers)
	case c.SurfaceConsumers < 0 || c.SurfaceConsumers > 1024:
		return fmt.Errorf("-surface %d: want 0 to 1024", c.SurfaceConsumers)
	case c.Subscribers < 0 || c.Subscribers > 1024:
		return fmt.Errorf("-subscribers %d: want 0 to 1024", c.Subscribers)
	}
	for _, ep := range c.Etcd {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
			return fmt.Errorf("-etcd %q: want http://host:port (the replicas reach it through loopback proxies of their own)", ep)
		}
		if u.Scheme == "https" {
			return fmt.Errorf("-etcd %q: TLS endpoints are not supported by the loadgen", ep)
		}
	}
	return nil
}
