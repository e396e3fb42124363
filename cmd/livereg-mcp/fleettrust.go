package main

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// fleetTokenPreviousEnv holds the fleet tokens a replica still accepts
// while the fleet rotates to a new one (comma-separated): records signed
// with them are believed and hops that carry them answered, but nothing is
// signed or sent with them.
const fleetTokenPreviousEnv = "LIVEREG_FLEET_TOKEN_PREVIOUS"

// embeddedPeers are the peers a replica of an -etcd-embedded fleet
// forwards to unless -fleet-peers says otherwise: the embedded etcd
// listens on loopback only, so every replica is on this machine.
var embeddedPeers = []string{"127.0.0.0/8", "::1/128", "localhost"}

// checkFleetTrust parses the fleet trust settings of cfg, which joins a
// fleet, and checks them against the rest as Join would, so that a
// contradiction (an -advertise host that -fleet-peers excludes, say) exits
// 2 before anything starts. Its errors quote no token.
func checkFleetTrust(cfg *config, getenv func(string) string) error {
	if prev := getenv(fleetTokenPreviousEnv); prev != "" {
		// Commas or white space separate them, so that a list pasted
		// one token a line works too.
		for i, tok := range strings.FieldsFunc(prev, func(r rune) bool { return r == ',' || isSpaceOrControl(r) }) {
			switch {
			case !isBearerToken(tok):
				return fmt.Errorf("$%s: token %d is not a bearer token", fleetTokenPreviousEnv, i+1)
			case len(tok) < mcpserve.MinFleetTokenBytes:
				return fmt.Errorf("$%s: token %d is shorter than %d bytes", fleetTokenPreviousEnv, i+1, mcpserve.MinFleetTokenBytes)
			}
			cfg.fleetPrevious = append(cfg.fleetPrevious, tok)
		}
	}
	switch {
	case cfg.fleetPeersFlag != "":
		for p := range strings.SplitSeq(cfg.fleetPeersFlag, ",") {
			cfg.fleetPeers = append(cfg.fleetPeers, strings.TrimSpace(p))
		}
	case cfg.etcdEmbedded != "":
		cfg.fleetPeers = embeddedPeers
	}
	probe := fleetConfig(*cfg, []string{"http://127.0.0.1:2379"}, cfg.advertise)
	if err := probe.Validate(); err != nil {
		return fmt.Errorf("-fleet-peers or -advertise: %w", err)
	}
	return nil
}

// fleetConfig is the etcdfleet.Config of cfg's replica.
func fleetConfig(cfg config, endpoints []string, advertise string) etcdfleet.Config {
	return etcdfleet.Config{
		Endpoints:      endpoints,
		Prefix:         cfg.fleetPrefix,
		TTL:            cfg.fleetTTL,
		Replica:        cfg.replica,
		Advertise:      advertise,
		Token:          cfg.fleetToken,
		PreviousTokens: cfg.fleetPrevious,
		Peers:          cfg.fleetPeers,

		// -fleet-insecure-network (tls.go): Join refuses a plain http
		// Advertise beyond loopback without it, as checkAdvertiseScheme does.
		InsecureNetwork: cfg.insecureNetwork,
	}
}

// collectors returns the fleet's Prometheus collectors: none outside a
// fleet.
func (f *fleet) collectors() []prometheus.Collector {
	if f == nil || f.rep == nil {
		return nil
	}
	return []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "livereg_fleet_records_rejected_total",
		Help: "Fleet records this replica ignored: not signed with the fleet token, or no valid route.",
	}, func() float64 { return float64(f.rep.Rejected()) })}
}
