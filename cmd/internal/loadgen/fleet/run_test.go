package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/report"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// shortConfig is a run of a few seconds on three replicas, with a failure
// 400 ms after the last: a revoked lease, then a crash.
func shortConfig() Config {
	cfg := DefaultConfig()
	cfg.Duration = 3 * time.Second
	cfg.Consumers, cfg.Resolvers = 6, 2
	cfg.ChaosEvery = 400 * time.Millisecond
	cfg.Seed = 42
	// The forger has a test of its own (TestRunFleetForger).
	cfg.Forge = false
	return cfg
}

func TestRunFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet for a few seconds")
	}
	// The etcd of a real cluster, as -etcd gives it: the run embeds none.
	ep, stop, err := startEtcd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := shortConfig()
	cfg.Etcd = []string{ep}
	// go test runs packages side by side on the same cores: the timing
	// bounds of invariants 4 and 5 are the smoke run's (it runs alone)
	// and the checkers' own tests'; this run checks everything else as
	// the smoke run does.
	cfg.ConvergeBound, cfg.FreeSlack = time.Second, 2*time.Second
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Config.Etcd != ep {
		t.Errorf("the report says etcd %q, want %q", rep.Config.Etcd, ep)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	t.Log("\n" + out.String())
	if rep.Failed() {
		t.Fatalf("%d violations, %d errors", rep.TotalViolations(), rep.Errors)
	}
	if rep.Crashes == 0 || rep.SessionLosses.Revoked+rep.SessionLosses.Cut == 0 {
		t.Errorf("%d crashes, %d revoked, %d cut: want a crash and a session loss in a run", rep.Crashes, rep.SessionLosses.Revoked, rep.SessionLosses.Cut)
	}
	// A checker that never checks proves nothing.
	for _, inv := range Invariants {
		if inv == InvForgedListed || inv == InvForgedFollowed || inv == InvImpostor {
			continue // the forger, and with it the impostor, is off
		}
		if rep.Checks[inv.String()] == 0 {
			t.Errorf("invariant %s was never checked", inv)
		}
	}
	for _, o := range []op{opCallLocal, opCallForward, opQuietLocal, opQuietForward} {
		if rep.Ops[o.String()].Count == 0 {
			t.Errorf("no %s measured", o)
		}
	}
	if rep.Claims == 0 || rep.ClaimsPerSec <= 0 || rep.ConvergenceNs < 0 {
		t.Errorf("claims %d (%.0f/s), convergence %d ns", rep.Claims, rep.ClaimsPerSec, rep.ConvergenceNs)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ops", "forward_overhead_p50_ns", "convergence_ns", "claims_per_sec", "crashes", "session_losses", "violations", "checks"} {
		if _, ok := back[k]; !ok {
			t.Errorf("the JSON report lacks %q", k)
		}
	}
}

// unfenced is a planted fault: a release that, besides the real one,
// deletes the name's key a moment later whoever holds it then, as a
// release not fenced on the key's create revision would.
type unfenced struct {
	rep *etcdfleet.Replica
	cli *clientv3.Client
}

func (u unfenced) Claim(ctx context.Context, cl catalog.Claim) (func(), error) {
	rel, err := u.rep.Claim(ctx, cl)
	if err != nil {
		return nil, err
	}
	key, _ := u.rep.Key(cl.Kind, cl.Name)
	return func() {
		rel()
		time.Sleep(20 * time.Millisecond) // late: a successor may hold the name by now
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = u.cli.Delete(ctx, key)
	}, nil
}

func TestRunFleetCatchesUnfencedRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet for a few seconds")
	}
	cfg := shortConfig()
	cfg.Duration, cfg.ChaosEvery = 1500*time.Millisecond, 0
	rep, err := run(context.Background(), cfg, func(f *fleet) {
		f.claimer = func(r *etcdfleet.Replica) catalog.Claimer { return unfenced{r, f.direct} }
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Violations[InvLateReleaseRemovedSuccessor.String()] == 0 || rep.Violations[InvTwoLiveClaims.String()] == 0 {
		var out bytes.Buffer
		rep.WriteText(&out)
		t.Fatalf("an unfenced late release went unseen:\n%s", out.String())
	}
	if code := rep.Verdict().ExitCode(); code != report.ExitViolations {
		t.Errorf("exit code %d, want %d", code, report.ExitViolations)
	}
}

func TestFleetArg(t *testing.T) {
	for _, tc := range []struct {
		args []string
		n    int
		rest string
		ok   bool
	}{
		{[]string{"-duration", "5s"}, 0, "-duration 5s", false},
		{[]string{"-fleet", "3", "-duration", "5s"}, 3, "-duration 5s", true},
		{[]string{"-duration", "5s", "--fleet=2"}, 2, "-duration 5s", true},
		{[]string{"-fleet", "0", "-mcp"}, 0, "-mcp", true},
		{[]string{"-fleet", "x"}, -1, "", true},
		{[]string{"-fleet"}, -1, "", true},
		{[]string{"--", "-fleet", "3"}, 0, "-- -fleet 3", false},
	} {
		n, rest, ok := FleetArg(tc.args)
		if n != tc.n || strings.Join(rest, " ") != tc.rest || ok != tc.ok {
			t.Errorf("FleetArg(%q) = %d, %q, %v; want %d, %q, %v", tc.args, n, rest, ok, tc.n, tc.rest, tc.ok)
		}
	}
}

func TestMainBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-fleet", "0"},
		{"-fleet", "x"},
		{"-fleet"},
		{"-fleet", "3", "-fleet-ttl", "1500ms"},
		{"-fleet", "3", "-etcd", "https://127.0.0.1:2379"},
		{"-fleet", "3", "-mcp"},
		{"-fleet", "3", "-duration", "0"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != report.ExitUsage {
			t.Errorf("Main(%q) = %d, want %d; stderr %s", args, code, report.ExitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), "usage:") {
			t.Errorf("Main(%q): no usage line in %q", args, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"-fleet", "3", "-h"}, &out, &errb); code != report.ExitOK || !strings.Contains(out.String(), "-fleet-ttl") {
		t.Errorf("-h: code %d, help %q", code, out.String())
	}
}

// deaf is a planted fault: its claims' Kill does nothing, so a replica
// that loses its session cannot kill the consumers that claimed under it.
type deaf struct{ rep *etcdfleet.Replica }

func (d deaf) Claim(ctx context.Context, cl catalog.Claim) (func(), error) {
	cl.Kill = func() {}
	return d.rep.Claim(ctx, cl)
}

func TestRunFleetCatchesConsumersOutlivingTheirSession(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet for a few seconds")
	}
	cfg := shortConfig()
	// Consumers held past the end of the run, on many names, so that the
	// replica whose lease is revoked first holds some for good.
	cfg.Duration, cfg.Hold, cfg.Consumers, cfg.Names = 2*time.Second, 10*time.Second, 12, 24
	rep, err := run(context.Background(), cfg, func(f *fleet) {
		f.claimer = func(r *etcdfleet.Replica) catalog.Claimer { return deaf{r} }
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SessionLosses.Revoked == 0 {
		t.Fatal("no lease was revoked")
	}
	if rep.Violations[InvTwoLiveClaims.String()] == 0 || rep.Violations[InvLostSessionClaimLives.String()] == 0 {
		var out bytes.Buffer
		rep.WriteText(&out)
		t.Fatalf("consumers that outlived their session went unseen:\n%s", out.String())
	}
}

// blind is a planted fault: the server's Peers fails every other lookup,
// so that calls for routes other replicas hold are often answered unknown.
type blind struct {
	rep *etcdfleet.Replica
	n   *atomic.Int64
}

func (b blind) Peer(kind catalog.Kind, name string) (string, bool) {
	if b.n.Add(1)%2 == 0 {
		return "", false
	}
	return b.rep.Peer(kind, name)
}

func TestRunFleetCatchesLostForwards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet for a few seconds")
	}
	cfg := shortConfig()
	cfg.Duration, cfg.ChaosEvery = time.Second, 0
	var n atomic.Int64
	rep, err := run(context.Background(), cfg, func(f *fleet) {
		f.peers = func(r *etcdfleet.Replica) mcpserve.Peers { return blind{r, &n} }
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Violations[InvForwardAnswer.String()] == 0 {
		var out bytes.Buffer
		rep.WriteText(&out)
		t.Fatalf("calls that were not forwarded went unseen:\n%s", out.String())
	}
}
