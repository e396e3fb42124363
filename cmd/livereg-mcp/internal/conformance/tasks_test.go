package conformance_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/livereg-mcp/internal/conformance"
)

// slow_compute's seconds are bounded: a call that asks for more than 60,
// or for less than none, is refused before a task starts.
func TestSlowComputeBounded(t *testing.T) {
	routes, err := conformance.Routes()
	require.NoError(t, err)
	cat, err := catalog.New(catalog.Config{Logger: quiet()})
	require.NoError(t, err)
	for _, r := range routes {
		if r.Name != "slow_compute" {
			continue
		}
		k, err := r.Start(context.Background(), cat)
		require.NoError(t, err)
		t.Cleanup(func() { _ = k.Stop(context.Background()) })
	}
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{`{"seconds":0,"label":"now"}`, true},
		{`{"seconds":60}`, true},
		{`{"seconds":61}`, false},
		{`{"seconds":1e300}`, false},
		{`{"seconds":-1}`, false},
	} {
		held := cat.Stats().Tasks.Held
		res, err := cat.CallTool(context.Background(), "slow_compute", json.RawMessage(tc.args), "", catalog.WithTasks())
		if !tc.ok {
			require.ErrorIs(t, err, catalog.ErrInvalidArguments, tc.args)
			require.Equal(t, held, cat.Stats().Tasks.Held, "%s: a refusal starts no task", tc.args)
			continue
		}
		require.NoError(t, err, tc.args)
		require.NotNil(t, res.Task, tc.args)
		require.NoError(t, cat.CancelTask(res.Task.ID(), ""))
	}
}
