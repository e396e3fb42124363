package inproc

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/cmd/internal/loadgen/cli"
	"github.com/livereg/livereg/mcpserve"
)

// Config is one run's settings. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Common: Names is the distinct tool names the consumers draw from
	// (prompts and fixed resources half as many, template groups a
	// quarter); a Duration of 0 with Ops set runs until Ops.
	cli.Common
	Cap           int   // the catalog's tool cap; prompts, templates and fixed resources a quarter each (kindCap)
	Ops           int64 // resolver operations (calls, gets, reads, listings) to run; 0: no limit
	MaxConcurrent int   // bodies of a route at once (catalog.WithMaxConcurrent); 0: no limit
	MissingPlan   bindsec.MissingPlanMode
	Mix           Mix
	MCP           bool   // drive calls and listings through an MCP client too
	Target        string // URL of a running MCP server (loopback only); implies MCP
	// Protocol is the MCP revision the clients ask for and must get: ""
	// for the SDK's own negotiation (with livereg, 2026-07-28), or one of
	// Protocols. ProtocolCurrent runs the in-process server stateless, so
	// that its clients hear list_changed over subscriptions/listen from a
	// server without sessions; ProtocolLegacy gives them sessions. It
	// implies MCP.
	Protocol string
}

// Protocols are the MCP revisions -protocol accepts.
var Protocols = []string{ProtocolLegacy, ProtocolCurrent}

const (
	// ProtocolLegacy is the revision of a session: initialize, and
	// list_changed on the session's standalone stream.
	ProtocolLegacy = "2025-11-25"
	// ProtocolCurrent is the revision without sessions: server/discover,
	// and list_changed over subscriptions/listen.
	ProtocolCurrent = mcpserve.ProtocolStateless
)

// Mix holds the relative weights of the death shapes and of the resolver
// operations, and three percentages.
type Mix struct {
	Stop, Cancel, Panic, Drop int // weights of the four death shapes
	Call, Get, Read, List     int // weights of the resolver operations
	Tool, Prompt, Template    int // weights of the kinds consumers start and listings list
	Resource                  int // weight of fixed resources, among those kinds and among reads
	Late                      int // % of cancelled or panicked consumers restarted and then stopped late
	BadCred                   int // % of calls made without valid credentials
	Public                    int // % of routes whose plan is public
}

// DefaultMix is the mix of a run without -mix.
var DefaultMix = Mix{Stop: 35, Cancel: 25, Panic: 20, Drop: 20, Call: 60, Get: 15, Read: 15, List: 10,
	Tool: 50, Prompt: 25, Template: 25, Resource: 25, Late: 50, BadCred: 20, Public: 20}

// DefaultConfig is sized for a 2-core machine: twelve consumers over
// twelve names against a cap of eight, so that starts collide on names
// (takeovers, duplicates) and on the cap in every run.
func DefaultConfig() Config {
	return Config{
		Common:      cli.Common{Resolvers: 4, Consumers: 12, Names: 12, Duration: 10 * time.Second, Hold: 10 * time.Millisecond},
		Cap:         8,
		MissingPlan: bindsec.PassThrough,
		Mix:         DefaultMix,
	}
}

// mixKeys are the keys -mix accepts, with what each sets.
var mixKeys = map[string]struct {
	field func(*Mix) *int
	doc   string
	pct   bool
}{
	"stop":     {func(m *Mix) *int { return &m.Stop }, "weight of clean Stop", false},
	"cancel":   {func(m *Mix) *int { return &m.Cancel }, "weight of context cancel", false},
	"panic":    {func(m *Mix) *int { return &m.Panic }, "weight of panic in the route body", false},
	"drop":     {func(m *Mix) *int { return &m.Drop }, "weight of drop without Stop (GC)", false},
	"call":     {func(m *Mix) *int { return &m.Call }, "weight of tool calls", false},
	"get":      {func(m *Mix) *int { return &m.Get }, "weight of prompt gets", false},
	"read":     {func(m *Mix) *int { return &m.Read }, "weight of reads (of templated URIs or fixed resources, by template/resource)", false},
	"list":     {func(m *Mix) *int { return &m.List }, "weight of listings (of the kind drawn by tool/prompt/template/resource)", false},
	"tool":     {func(m *Mix) *int { return &m.Tool }, "weight of tools among consumer starts and listings", false},
	"prompt":   {func(m *Mix) *int { return &m.Prompt }, "weight of prompts among consumer starts and listings", false},
	"template": {func(m *Mix) *int { return &m.Template }, "weight of resource templates among consumer starts and listings", false},
	"resource": {func(m *Mix) *int { return &m.Resource }, "weight of fixed resources (which publish updates) among consumer starts, listings and reads", false},
	"late":     {func(m *Mix) *int { return &m.Late }, "% of crashed consumers restarted, then stopped late", true},
	"badcred":  {func(m *Mix) *int { return &m.BadCred }, "% of calls without valid credentials", true},
	"public":   {func(m *Mix) *int { return &m.Public }, "% of routes with a public plan", true},
}

// ParseMix applies "key=value,key=value" to base. Keys not named keep
// base's value.
func ParseMix(s string, base Mix) (Mix, error) {
	m := base
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		key, known := mixKeys[strings.ToLower(k)]
		if !ok || !known {
			return base, fmt.Errorf("-mix: %q: want key=value with key one of %s", part, strings.Join(sortedMixKeys(), ", "))
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (key.pct && n > 100) {
			return base, fmt.Errorf("-mix: %q: want a non-negative integer%s", part, map[bool]string{true: " up to 100", false: ""}[key.pct])
		}
		*key.field(&m) = n
	}
	if m.Stop+m.Cancel+m.Panic+m.Drop == 0 {
		return base, errors.New("-mix: the death shapes stop, cancel, panic, drop cannot all be 0")
	}
	if m.Call+m.Get+m.Read+m.List == 0 {
		return base, errors.New("-mix: the operations call, get, read, list cannot all be 0")
	}
	if m.Tool+m.Prompt+m.Template+m.Resource == 0 {
		return base, errors.New("-mix: the kinds tool, prompt, template, resource cannot all be 0")
	}
	return m, nil
}

// String formats m as the -mix flag takes it, every share named.
func (m Mix) String() string {
	return fmt.Sprintf("stop=%d,cancel=%d,panic=%d,drop=%d,call=%d,get=%d,read=%d,list=%d,tool=%d,prompt=%d,template=%d,resource=%d,late=%d,badcred=%d,public=%d",
		m.Stop, m.Cancel, m.Panic, m.Drop, m.Call, m.Get, m.Read, m.List, m.Tool, m.Prompt, m.Template, m.Resource, m.Late, m.BadCred, m.Public)
}

func sortedMixKeys() []string {
	keys := make([]string, 0, len(mixKeys))
	for k := range mixKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// UsageLine is printed with every flag error.
const UsageLine = "usage: loadgen [-duration 10s | -ops N] [-resolvers N] [-consumers N] [-names K] [-cap N] [-mix k=v,...] [-seed N] [-json FILE] [-mcp [-target URL] [-protocol VERSION]]"

// ParseArgs parses command-line arguments into a Config. It writes the
// usage text to w for -h (returning flag.ErrHelp) and returns an error
// describing any bad flag.
func ParseArgs(args []string, w io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed once, by the caller
	cfg.Common.Flags(fs, cli.Help{
		Resolvers: "goroutines that call tools (resolve + guard + dispatch) and list them",
		Consumers: "goroutines that start consumers, hold them a random while, and end them by a death shape",
		Names:     "distinct tool names the consumers draw from (prompt names and fixed resource URIs: half as many; template groups of two keys: a quarter); fewer names mean more collisions and takeovers",
		Duration:  "how long to run; with -ops and no -duration, run until -ops is reached",
		Seed:      "seed of every worker's random choices (0: pick one and print it); goroutine interleaving still varies between runs",
		Hold:      "longest time a consumer is kept before it is ended (uniformly random up to this)",
	})
	fs.IntVar(&cfg.Cap, "cap", cfg.Cap, "the catalog's tool cap; below -consumers, starts collide with the cap; prompts, templates and fixed resources are each capped at a quarter of it (at least 1)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "stop after this many resolver operations (calls, gets, reads, listings); 0 means no limit")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", cfg.MaxConcurrent, "at most this many bodies of a route run at once (catalog.WithMaxConcurrent); 0, the default, sets no limit")
	missing := fs.String("missing-plan", "pass", "what a route without a live plan does: pass (ADR-0068's pass-through, the adversarial setting) or deny")
	mix := fs.String("mix", "", "shares, as key=value,...; keys not given keep their defaults:\n"+mixHelp())
	fs.BoolVar(&cfg.MCP, "mcp", false, "drive calls, prompt gets, templated reads and tool listings through the official MCP SDK client over streamable HTTP to an in-process mcpserve server on loopback: -resolvers goroutines call through it, one calls in-process beside them")
	fs.StringVar(&cfg.Target, "target", "", "with -mcp: `URL` of a running livereg-mcp server to call and list instead of the in-process one (loopback only); the invariants are then checked on the in-process catalog only, since the target's consumers are not the loadgen's")
	fs.StringVar(&cfg.Protocol, "protocol", "", "with -mcp: the MCP `VERSION` the clients ask for and must get, "+strings.Join(Protocols, " or ")+
		"; "+ProtocolCurrent+" serves the in-process server stateless (server/discover, list_changed over subscriptions/listen), "+ProtocolLegacy+" gives the clients sessions; empty means the SDK's own negotiation, which livereg settles at "+ProtocolCurrent+" (implies -mcp)")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(w, fs)
		}
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if cfg.Ops > 0 && !explicit["duration"] {
		cfg.Duration = 0
	}
	var err error
	if cfg.Mix, err = ParseMix(*mix, cfg.Mix); err != nil {
		return cfg, err
	}
	switch strings.ToLower(*missing) {
	case "pass", "pass-through", "passthrough":
		cfg.MissingPlan = bindsec.PassThrough
	case "deny":
		cfg.MissingPlan = bindsec.Deny
	default:
		return cfg, fmt.Errorf("-missing-plan: %q: want pass or deny", *missing)
	}
	if cfg.Target != "" || cfg.Protocol != "" {
		cfg.MCP = true
	}
	return cfg, cfg.Validate()
}

func mixHelp() string {
	var b strings.Builder
	d := DefaultMix
	for _, k := range sortedMixKeys() {
		fmt.Fprintf(&b, "  %-9s %s (default %d)\n", k, mixKeys[k].doc, *mixKeys[k].field(&d))
	}
	return strings.TrimRight(b.String(), "\n")
}

func writeHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "loadgen hammers an in-process livereg catalog while consumers die in every\n"+
		"way ADR-0068 names, checks the ADR's invariants as it runs, and reports.\n"+
		"Exit status: 0 no violations, 1 violations found (listed), 2 bad flags,\n3 interrupted before the end with no violation so far (INCOMPLETE).\n\n%s\n\n", UsageLine)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	if err := c.Common.Validate(4096, 100000); err != nil {
		return err
	}
	switch {
	case c.Cap < 1:
		return fmt.Errorf("-cap %d: want at least 1", c.Cap)
	case c.Duration < 0:
		return fmt.Errorf("-duration %v: want a positive duration", c.Duration)
	case c.Ops < 0:
		return fmt.Errorf("-ops %d: want 0 (no limit) or more", c.Ops)
	case c.Duration == 0 && c.Ops == 0:
		return errors.New("-duration 0 needs -ops: the run would never end")
	case c.MaxConcurrent < 0 || c.MaxConcurrent > 1024:
		return fmt.Errorf("-max-concurrent %d: want 0 (no limit) to 1024", c.MaxConcurrent)
	}
	if c.Protocol != "" && !slices.Contains(Protocols, c.Protocol) {
		return fmt.Errorf("-protocol %q: want %s", c.Protocol, strings.Join(Protocols, " or "))
	}
	if c.Target != "" {
		if err := checkLoopbackURL(c.Target); err != nil {
			return fmt.Errorf("-target: %w", err)
		}
	}
	return nil
}

// checkLoopbackURL accepts only http(s) URLs whose host is a loopback
// address or localhost: a stress tool must not be pointed at someone
// else's server by a typo.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an http or https URL", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q: host %q is not loopback (127.0.0.0/8, ::1, localhost)", raw, host)
}
