package etcdfleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/livereg/livereg/etcdfleet"
)

// The fields that decide what a replica trusts: a token, previous tokens,
// the peer path and the allowed peers. Refusals quote no token.
func TestValidateTrustFields(t *testing.T) {
	const secret = "short-secret"
	ok := etcdfleet.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/p", Token: fleetToken, Advertise: "http://127.0.0.1:8931/fleet"}
	for name, tc := range map[string]struct {
		mod   func(*etcdfleet.Config)
		valid bool
	}{
		"no token":              {func(c *etcdfleet.Config) { c.Token = "" }, false},
		"short token":           {func(c *etcdfleet.Config) { c.Token = secret }, false},
		"short previous token":  {func(c *etcdfleet.Config) { c.PreviousTokens = []string{fleetToken, secret} }, false},
		"empty previous token":  {func(c *etcdfleet.Config) { c.PreviousTokens = []string{""} }, false},
		"previous tokens":       {func(c *etcdfleet.Config) { c.PreviousTokens = []string{"an-older-token-0123456789"} }, true},
		"relative peer path":    {func(c *etcdfleet.Config) { c.PeerPath = "fleet" }, false},
		"peer path with query":  {func(c *etcdfleet.Config) { c.PeerPath = "/fleet?x" }, false},
		"advertise other path":  {func(c *etcdfleet.Config) { c.Advertise = "http://127.0.0.1:8931/steal" }, false},
		"custom peer path":      {func(c *etcdfleet.Config) { c.PeerPath = "/internal"; c.Advertise = "http://127.0.0.1:1/x/internal" }, true},
		"no advertise":          {func(c *etcdfleet.Config) { c.Advertise = ""; c.Peers = []string{"10.0.0.0/8"} }, true},
		"peers":                 {func(c *etcdfleet.Config) { c.Peers = []string{"127.0.0.0/8", "::1/128", "10.1.2.3", "Host-1.example."} }, true},
		"advertise not a peer":  {func(c *etcdfleet.Config) { c.Peers = []string{"10.0.0.0/8"} }, false},
		"advertise named peer":  {func(c *etcdfleet.Config) { c.Peers = []string{"LOCALHOST"}; c.Advertise = "http://localhost:1/fleet" }, true},
		"bad peer":              {func(c *etcdfleet.Config) { c.Peers = []string{"not a host"} }, false},
		"bad CIDR":              {func(c *etcdfleet.Config) { c.Peers = []string{"10.0.0.0/33"} }, false},
		"empty peer":            {func(c *etcdfleet.Config) { c.Peers = []string{""} }, false},
		"peer with a port":      {func(c *etcdfleet.Config) { c.Peers = []string{"127.0.0.1:80"} }, false},
		"peer with a zone":      {func(c *etcdfleet.Config) { c.Peers = []string{"fe80::1%eth0"} }, false},
		"peer label too long":   {func(c *etcdfleet.Config) { c.Peers = []string{strings.Repeat("a", 64) + ".example"} }, false},
		"peer label hyphenated": {func(c *etcdfleet.Config) { c.Peers = []string{"-a.example"} }, false},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			err := cfg.Validate()
			switch {
			case tc.valid && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.valid:
				return
			case !errors.Is(err, etcdfleet.ErrInvalidConfig):
				t.Fatalf("Validate: %v, want ErrInvalidConfig", err)
			case strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), fleetToken):
				t.Fatalf("the refusal quotes a token: %v", err)
			}
			if _, err := etcdfleet.Join(context.Background(), cfg); !errors.Is(err, etcdfleet.ErrInvalidConfig) {
				t.Fatalf("Join: %v, want ErrInvalidConfig", err)
			}
		})
	}
}
