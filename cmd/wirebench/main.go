// Command wirebench measures MCP servers over streamable HTTP on loopback,
// each in a process of its own: livereg's mcpserve, a bare go-sdk server,
// a bare mcp-go server and a plain net/http floor, stateful and stateless
// (package cmd/internal/wire). A fresh server serves each run; the runs
// are interleaved, round after round, so that a slow moment of a shared
// machine falls on every server alike. On a machine of two cores or more
// the server is pinned to core 0 and the load client to core 1 (with
// taskset), so that the server's time is its own.
//
// Each run loads one server from -clients goroutines for -warmup, then
// measures for -duration: calls per second (its inverse as ns/op), the
// latency percentiles (an HDR histogram), the server's CPU time per call
// (from /proc), its allocations per call (from its own runtime counters,
// read over a side endpoint) and its peak RSS. Every answer is checked.
//
// The output is in the format of go test -bench, one line per run, for
// benchstat and cmd/benchreport:
//
//	BenchmarkWireCall/clients=16/impl=livereg-1  N  ns/op  p50-ns  p99-ns  cpu-ns/op  B/op  allocs/op  rss-MiB
//
// The suffix is the number of cores the server may use.
//
// Usage:
//
//	wirebench [-rounds 5] [-duration 2s] [-servers floor,livereg,...] [-pin=true] [-gogc 100,400]
//
// make bench-wire runs it and judges the wire's goals.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/livereg/livereg/cmd/internal/wire"
)

// pinnedEnv marks the load process as already pinned to its core.
const pinnedEnv = "WIREBENCH_PINNED"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		// On standard output too, where make bench-wire looks for it.
		fmt.Println("FAIL")
		fmt.Fprintln(os.Stderr, "wirebench:", err)
		os.Exit(1)
	}
}

type config struct {
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	servers     []string
	listTools   int
	pin         bool
	serve       string // server mode: the server to run
	serveTools  int
	callClients []int
	gogc        []string // GOGC values each server runs at; one "" for the inherited one
}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("wirebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	names := make([]string, len(wire.Servers))
	for i, s := range wire.Servers {
		names[i] = s.Name
	}
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds; each runs every workload against every server once")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "how long each run is measured")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "how long each run loads its server before it measures")
	servers := fs.String("servers", strings.Join(names, ","), "the servers to measure, comma-separated")
	fs.IntVar(&cfg.listTools, "list-tools", 1000, "the tools a listing run lists")
	fs.BoolVar(&cfg.pin, "pin", runtime.NumCPU() >= 2, "pin the server to core 0 and the load to core 1 (needs taskset)")
	fs.StringVar(&cfg.serve, "serve", "", "run `SERVER` on a loopback port, print its address, and serve until stdin closes (used by the load)")
	fs.IntVar(&cfg.serveTools, "tools", 1, "with -serve: the tools it serves")
	gogc := fs.String("gogc", "", "run every server at each of these `GOGC` values, comma-separated (its runs named .../gogc=V); empty: the environment's")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.servers = strings.Split(*servers, ",")
	cfg.gogc = []string{""}
	if *gogc != "" {
		cfg.gogc = strings.Split(*gogc, ",")
		for _, v := range cfg.gogc {
			if n, err := strconv.Atoi(v); (err != nil || n <= 0) && v != "off" {
				return cfg, fmt.Errorf("-gogc %q: want positive percentages or off", v)
			}
		}
	}
	for _, name := range cfg.servers {
		if _, err := wire.Lookup(name); err != nil {
			return cfg, err
		}
	}
	if cfg.rounds < 1 || cfg.duration <= 0 || cfg.warmup < 0 || cfg.listTools < 1 {
		return cfg, fmt.Errorf("-rounds, -duration and -list-tools must be positive, -warmup not negative")
	}
	cfg.callClients = []int{1, 16, 128}
	return cfg, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if cfg.serve != "" {
		return serve(ctx, cfg.serve, cfg.serveTools, os.Stdin, stdout)
	}
	if cfg.pin && os.Getenv(pinnedEnv) == "" {
		if ts, err := exec.LookPath("taskset"); err == nil {
			return repin(ctx, ts, args, stdout, stderr)
		}
		fmt.Fprintln(stderr, "wirebench: taskset not found; running unpinned")
		cfg.pin = false
	}
	return measureAll(ctx, cfg, stdout, stderr)
}

// repin runs this command again on core 1, the server's core being 0.
func repin(ctx context.Context, taskset string, args []string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, taskset, append([]string{"-c", "1", self}, args...)...)
	cmd.Env = append(os.Environ(), pinnedEnv+"=1")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}

// workload is one kind of run: a call from some clients, or a listing.
type workload struct {
	name    string
	clients int
	tools   int
	list    bool
}

func (cfg config) workloads() []workload {
	var ws []workload
	for _, n := range cfg.callClients {
		ws = append(ws, workload{name: fmt.Sprintf("WireCall/clients=%d", n), clients: n, tools: 1})
	}
	return append(ws, workload{name: "WireList", clients: 16, tools: cfg.listTools, list: true})
}

func measureAll(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cores := runtime.NumCPU()
	if cfg.pin {
		cores = 1
	}
	fmt.Fprintf(stdout, "goos: %s\ngoarch: %s\npkg: github.com/livereg/livereg/cmd/wirebench\ncpu: %s\n", runtime.GOOS, runtime.GOARCH, cpuModel())
	for round := 1; round <= cfg.rounds; round++ {
		for _, w := range cfg.workloads() {
			for _, name := range cfg.servers {
				if err := ctx.Err(); err != nil {
					return err
				}
				s, _ := wire.Lookup(name)
				if w.list && s.CallsOnly {
					continue
				}
				for _, gogc := range cfg.gogc {
					r, err := measure(ctx, self, cfg, s, w, gogc)
					if err != nil {
						return fmt.Errorf("round %d, %s, %s: %w", round, w.name, name, err)
					}
					impl := name
					if gogc != "" {
						impl += "/gogc=" + gogc
					}
					fmt.Fprintf(stdout, "Benchmark%s/impl=%s-%d\t%d\t%s\n", w.name, impl, cores, r.calls, r.metrics())
				}
			}
		}
		fmt.Fprintf(stderr, "wirebench: round %d of %d done\n", round, cfg.rounds)
	}
	fmt.Fprintln(stdout, "PASS")
	return nil
}

// cpuModel names the processor as go test does.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
