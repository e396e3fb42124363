package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/livereg/livereg/etcdfleet"
)

// -fleet-peers and $LIVEREG_FLEET_TOKEN_PREVIOUS: parsed, defaulted
// (loopback only for -etcd-embedded), checked against -advertise as Join
// would, and refused without quoting a token.
func TestFleetTrustFlags(t *testing.T) {
	const previous = "previous-fleet-token-0123"
	env := func(prev string) func(string) string {
		return func(k string) string {
			switch k {
			case fleetTokenEnv:
				return testFleetToken
			case fleetTokenPreviousEnv:
				return prev
			}
			return ""
		}
	}
	for _, tt := range []struct {
		args     []string
		prev     string
		wantErr  string
		peers    []string
		previous []string
	}{
		{args: []string{"-etcd", "http://e:2379"}},
		{args: []string{"-etcd-embedded", "d"}, peers: embeddedPeers},
		{args: []string{"-etcd-embedded", "d", "-fleet-peers", "127.0.0.1, host.example"}, peers: []string{"127.0.0.1", "host.example"}},
		{args: []string{"-etcd", "http://e:2379", "-fleet-peers", "10.0.0.0/8,fleet.internal", "-advertise", "https://10.0.0.5:8931/fleet"},
			peers: []string{"10.0.0.0/8", "fleet.internal"}},
		{args: []string{"-etcd", "http://e:2379"}, prev: previous + ", other-previous-token-0123", previous: []string{previous, "other-previous-token-0123"}},

		{args: []string{"-fleet-peers", "10.0.0.0/8"}, wantErr: "-fleet-peers needs -etcd"},
		{args: []string{"-etcd", "http://e:2379", "-fleet-peers", "10.0.0.0/8", "-advertise", "https://192.168.1.5:8931/fleet"}, wantErr: "-advertise"},
		{args: []string{"-etcd-embedded", "d", "-advertise", "https://10.0.0.5:8931/fleet"}, wantErr: "-advertise"},
		{args: []string{"-etcd", "http://e:2379", "-advertise", "https://10.0.0.5:8931/steal"}, wantErr: "/fleet"},
		{args: []string{"-etcd", "http://e:2379", "-fleet-peers", "not a host"}, wantErr: "-fleet-peers"},
		{args: []string{"-etcd", "http://e:2379", "-fleet-peers", "10.0.0.0/8,,"}, wantErr: "-fleet-peers"},
		{args: []string{"-etcd", "http://e:2379"}, prev: "short-secret", wantErr: "token 1 is shorter than 16 bytes"},
		{args: []string{"-etcd", "http://e:2379"}, prev: previous + ",has\"a\"quote\"in\"it\"long\"enough", wantErr: "token 2 is not a bearer token"},
	} {
		cfg, err := parseArgs(tt.args, env(tt.prev), io.Discard)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tt.args, err, tt.wantErr)
		case err != nil && (strings.Contains(err.Error(), testFleetToken) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), previous)):
			t.Errorf("%q: the error quotes a token: %v", tt.args, err)
		case err == nil && (!slices.Equal(cfg.fleetPeers, tt.peers) || !slices.Equal(cfg.fleetPrevious, tt.previous)):
			t.Errorf("%q: peers %q, previous %d tokens; want %q, %d", tt.args, cfg.fleetPeers, len(cfg.fleetPrevious), tt.peers, len(tt.previous))
		}
	}
}

// Contradicting fleet flags exit 2, quoting no token.
func TestFleetTrustFlagsExit2(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-etcd-embedded", t.TempDir(), "-advertise", "https://10.0.0.5:8931/fleet")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", fleetTokenEnv+"="+testFleetToken)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "-advertise") || strings.Contains(string(out), testFleetToken) {
		t.Errorf("exit %v, output %q; want exit status 2 and the reason, without the token", err, out)
	}
}

// A replica counts the records it ignored in
// livereg_fleet_records_rejected_total; outside a fleet there is no such
// metric.
func TestFleetRejectedMetric(t *testing.T) {
	var none *fleet
	if c := none.collectors(); c != nil {
		t.Fatalf("collectors of no fleet: %v", c)
	}
	ctx := ctxGuard(t)
	e, err := startEtcd(ctx, t.TempDir(), "http://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ep := e.Endpoint()
	rep, err := etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: []string{ep}, Prefix: "/t", TTL: time.Second, Replica: "a", Token: testFleetToken})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rep.Close(context.Background()) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/t/tools/free_gift", `{"replica":"x","kind":"tool","tool":{"name":"free_gift"}}`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister((&fleet{rep: rep}).collectors()...)
	for deadline := time.Now().Add(guard); ; time.Sleep(10 * time.Millisecond) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(mfs) == 1 && mfs[0].GetName() == "livereg_fleet_records_rejected_total" && mfs[0].GetMetric()[0].GetCounter().GetValue() == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics %v", mfs)
		}
	}
}
