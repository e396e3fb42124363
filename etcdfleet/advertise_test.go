package etcdfleet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/etcdfleet"
)

// An http Advertise URL beyond loopback is refused unless InsecureNetwork
// says the network is trusted; https anywhere, and http on loopback, are
// accepted as they are.
func TestAdvertisePlainHTTP(t *testing.T) {
	for _, tt := range []struct {
		advertise string
		insecure  bool
		ok        bool
	}{
		{"http://127.0.0.1:8931/fleet", false, true},
		{"http://127.9.9.9:8931/fleet", false, true},
		{"http://[::1]:8931/fleet", false, true},
		{"http://localhost:8931/fleet", false, true},
		{"http://LocalHost.:8931/fleet", false, true},
		{"https://10.0.0.5:8931/fleet", false, true},
		{"https://fleet.example:8931/fleet", false, true},
		{"http://10.0.0.5:8931/fleet", false, false},
		{"http://[2001:db8::5]:8931/fleet", false, false},
		{"http://fleet.example:8931/fleet", false, false},
		{"http://localhost.example:8931/fleet", false, false},
		{"http://0.0.0.0:8931/fleet", false, false},
		{"http://10.0.0.5:8931/fleet", true, true},
		{"http://fleet.example:8931/fleet", true, true},
	} {
		cfg := etcdfleet.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/p", Token: fleetToken,
			Advertise: tt.advertise, InsecureNetwork: tt.insecure}
		err := cfg.Validate()
		if tt.ok {
			assert.NoError(t, err, "%s insecure=%v", tt.advertise, tt.insecure)
			continue
		}
		require.ErrorIs(t, err, etcdfleet.ErrInvalidConfig, tt.advertise)
		require.ErrorIs(t, err, etcdfleet.ErrPlainHTTP, tt.advertise)
		assert.Contains(t, err.Error(), "InsecureNetwork")
		// Join refuses it before it connects to anything.
		r, err := etcdfleet.Join(context.Background(), cfg)
		require.ErrorIs(t, err, etcdfleet.ErrPlainHTTP, tt.advertise)
		assert.Nil(t, r)
	}
}
