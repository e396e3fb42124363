package inproc

import "github.com/livereg/livereg/cmd/internal/loadgen/latency"

// op is a kind of operation whose latency is measured.
type op uint8

const (
	opCall     op = iota // CallTool from a resolver, every outcome
	opList               // ListTools
	opStart              // StartTool, every outcome
	opStop               // Stop of a live consumer
	opLateStop           // Stop of a consumer that had already died
	opMCPCall            // tools/call through the MCP client
	opMCPList            // tools/list through the MCP client
	opGet                // GetPrompt from a resolver, every outcome
	opRead               // ReadResource of a templated URI from a resolver
	opMCPGet             // prompts/get through the MCP client
	opMCPRead            // resources/read of a templated URI through the MCP client
	numOps
)

var opNames = [numOps]string{"call", "list", "start", "stop", "late_stop", "mcp_call", "mcp_list", "get", "read", "mcp_get", "mcp_read"}

func (o op) String() string { return opNames[o] }

// latencies is one worker's histograms (package latency's Book and Set):
// a resolver owns its set, so that recording on the hot path takes no
// lock; the consumer goroutines, whose operations are far rarer, share one
// locked set to save memory. Every set is merged when the run ends.
type latencies = latency.Set[op]
