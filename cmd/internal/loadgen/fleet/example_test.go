package fleet_test

import (
	"fmt"

	"github.com/livereg/livereg/cmd/internal/loadgen/fleet"
)

// cmd/loadgen dispatches on -fleet: a fleet run with N other than 0, the
// single-process loadgen on the rest of the arguments otherwise.
func ExampleFleetArg() {
	for _, args := range [][]string{
		{"-fleet", "3", "-duration", "30s"},
		{"-fleet=0", "-mcp"},
		{"-duration", "5s"},
	} {
		n, rest, ok := fleet.FleetArg(args)
		fmt.Println(n, rest, ok)
	}
	// Output:
	// 3 [-duration 30s] true
	// 0 [-mcp] true
	// 0 [-duration 5s] false
}
