package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/livereg/livereg/cmd/internal/wire"
)

// result is one measured run.
type result struct {
	calls    int64
	elapsed  time.Duration
	p50, p99 int64         // ns
	cpu      time.Duration // the server's user and system time
	mem      memCounters   // the server's allocations during the run
	rss      int64         // the server's peak resident set, bytes
}

// metrics formats r as go test -bench does a benchmark's.
func (r result) metrics() string {
	n := float64(max(r.calls, 1))
	return fmt.Sprintf("%.0f ns/op\t%d p50-ns\t%d p99-ns\t%.0f cpu-ns/op\t%.0f B/op\t%.1f allocs/op\t%.1f rss-MiB",
		float64(r.elapsed)/n, r.p50, r.p99, float64(r.cpu)/n, float64(r.mem.TotalAlloc)/n, float64(r.mem.Mallocs)/n,
		float64(r.rss)/(1<<20))
}

// server is a server process of one run.
type server struct {
	cmd  *exec.Cmd
	url  string
	stop func() error
}

// start starts a fresh server process, on core 0 when pinning, with GOGC
// set to gogc unless it is empty.
func start(ctx context.Context, self string, pin bool, s wire.Server, tools int, gogc string) (*server, error) {
	args := []string{self, "-serve", s.Name, "-tools", strconv.Itoa(tools)}
	if pin {
		args = append([]string{"taskset", "-c", "0"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	if gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+gogc)
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() error { _ = in.Close(); return cmd.Wait() }
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = stop()
		return nil, fmt.Errorf("the server printed no address: %w", err)
	}
	return &server{cmd: cmd, url: "http://" + strings.TrimSpace(addr), stop: stop}, nil
}

// measure runs workload w against a fresh process of s, with GOGC set to
// gogc unless it is empty.
func measure(ctx context.Context, self string, cfg config, s wire.Server, w workload, gogc string) (result, error) {
	srv, err := start(ctx, self, cfg.pin, s, w.tools, gogc)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = srv.stop() }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: w.clients + 8}}
	defer hc.CloseIdleConnections()
	clients := make([]*wire.Client, w.clients)
	for i := range clients {
		clients[i] = &wire.Client{HTTP: hc, URL: srv.url + "/mcp"}
		if s.Stateful {
			if err := clients[i].Initialize(); err != nil {
				return result{}, err
			}
		}
	}
	op := func(c *wire.Client) error { return c.Call() }
	if w.list {
		op = func(c *wire.Client) error { return c.List(w.tools) }
	}
	if _, err := load(clients, op, cfg.warmup, nil); err != nil {
		return result{}, err
	}
	cpu0, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	mem0, err := readMem(hc, srv.url)
	if err != nil {
		return result{}, err
	}
	hist := hdrhistogram.New(1, int64(30*time.Second), 3)
	t0 := time.Now()
	calls, err := load(clients, op, cfg.duration, hist)
	elapsed := time.Since(t0)
	if err != nil {
		return result{}, err
	}
	cpu1, err := procCPU(srv.cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	mem1, err := readMem(hc, srv.url)
	if err != nil {
		return result{}, err
	}
	rss, err := procPeakRSS(srv.cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	return result{calls: calls, elapsed: elapsed, p50: hist.ValueAtQuantile(50), p99: hist.ValueAtQuantile(99), cpu: cpu1 - cpu0,
		mem: memCounters{Mallocs: mem1.Mallocs - mem0.Mallocs, TotalAlloc: mem1.TotalAlloc - mem0.TotalAlloc}, rss: rss}, nil
}

// load runs op from every client until d has passed, recording each
// latency in hist when it is not nil, and returns how many ops completed.
// The first error ends the load.
func load(clients []*wire.Client, op func(*wire.Client) error, d time.Duration, hist *hdrhistogram.Histogram) (int64, error) {
	var (
		n      atomic.Int64
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	deadline := time.Now().Add(d)
	for _, c := range clients {
		wg.Go(func() {
			local := hdrhistogram.New(1, int64(30*time.Second), 3)
			for !failed.Load() && time.Now().Before(deadline) {
				t0 := time.Now()
				if err := op(c); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
				_ = local.RecordValue(int64(time.Since(t0)))
				n.Add(1)
			}
			if hist != nil {
				mu.Lock()
				hist.Merge(local)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n.Load(), first
}

func readMem(hc *http.Client, url string) (memCounters, error) {
	resp, err := hc.Get(url + memPath)
	if err != nil {
		return memCounters{}, err
	}
	defer resp.Body.Close()
	var m memCounters
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

// clockTick is the unit of /proc/PID/stat's times, USER_HZ, which Linux
// fixes at 100 for user space.
const clockTick = 10 * time.Millisecond

// procCPU is the user and system time of process pid, all its threads.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields are counted after its closing one. utime and stime are
	// fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procPeakRSS is the peak resident set of process pid (VmHWM).
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}
