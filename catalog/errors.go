package catalog

import (
	"errors"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/shardreg"
)

// Errors returned by the catalog, wrapped with the route; match them with
// errors.Is. Denials by the route's plan are bindsec's errors
// (bindsec.ErrUnauthenticated, ErrForbidden, ErrExpired, ErrNoPlan).
var (
	// ErrNotFound: no live, ready route of that kind has that name (a
	// tool's or prompt's name, a resource's URI, a template's URI
	// template). The error names the kind ("unknown tool", "unknown
	// resource") and the name asked for. MCP answers it with JSON-RPC
	// error -32602, or -32002 for a resources/read.
	ErrNotFound = errors.New("catalog: not found")
	// ErrRouteGone: the route's owner died or stopped, or the route is
	// changing hands, between the lookup and the body's admission. The
	// body did not run; retrying may reach a successor.
	ErrRouteGone = errors.New("catalog: route gone")
	// ErrRoutePanicked: the route body panicked. The consumer is dead. The
	// error quotes the start of the panic's value; the whole value and the
	// stack go to Config.Logger at the consumer's death.
	ErrRoutePanicked = errors.New("catalog: route body panicked")
	// ErrRouteExited: the route body ended its goroutine with
	// runtime.Goexit (testing's FailNow does, for one). That is an unwind
	// too, so the consumer is dead and the error also matches
	// ErrRoutePanicked: code that handles a panic handles this. A task
	// gets it as its failure. On the caller's own goroutine nobody gets it,
	// since Go does not stop a Goexit: the caller's frames unwind as well,
	// after the catalog released what the call held (see route.finish).
	ErrRouteExited = errors.New("catalog: route body called runtime.Goexit")
	// ErrOverloaded: every slot of a route started WithMaxConcurrent is
	// taken and its waiting room is full. The body did not run.
	ErrOverloaded = errors.New("catalog: route overloaded")
	// ErrInvalidConfig: a Config field or start option is out of range.
	ErrInvalidConfig = errors.New("catalog: invalid config")
	// ErrInvalidRoute: a Tool or Resource given to Start is malformed (a
	// nil handler, an input schema that is not a JSON object).
	ErrInvalidRoute = errors.New("catalog: invalid route")
	// ErrInvalidArguments: a call's arguments are not a JSON object, or
	// its tool's input schema refuses them; it also wraps the validator's
	// error. The body did not run. MCP answers this with JSON-RPC error
	// -32602.
	ErrInvalidArguments = errors.New("catalog: invalid arguments")
	// ErrInvalidResult: a tool that declares an output schema returned a
	// result (not a tool error) whose StructuredContent the schema refuses,
	// or none; it also wraps the validator's error. The body ran. MCP
	// reports it as a tool error.
	ErrInvalidResult = errors.New("catalog: invalid result")
	// ErrNotSupported: a body asked its caller for something the caller
	// does not offer (Call.Sample, Call.Elicit): an in-process caller whose
	// Client lacks the function, or an MCP client that did not declare the
	// capability. Nothing was sent.
	ErrNotSupported = errors.New("catalog: not supported by the caller")
	// ErrTaskRequired: CallTool of a tool whose TaskSupport is
	// TaskRequired; the body did not run. StartTask it. MCP answers a
	// client of 2026-07-28 that did not negotiate tasks with -32021.
	ErrTaskRequired = errors.New("catalog: the tool runs as a task only")
	// ErrTooManyTasks: the task store is at one of its caps
	// (Config.MaxTasks, Config.MaxTasksPerCaller), and StartTask started
	// nothing; or a task's result did not fit Config.MaxTaskResultBytes,
	// and the task failed with it.
	ErrTooManyTasks = errors.New("catalog: too many tasks")
	// ErrInputRequired: a body asked its caller for input (Ask) that a
	// caller who answers in rounds (Round) has not given yet. Ask returns
	// it to the body, which returns it; the call then fails with an
	// *InputRequiredError that says what to ask.
	ErrInputRequired = errors.New("catalog: input required")
	// ErrInvalidRequest: a body's request to its caller (Call.Sample,
	// Call.Elicit) is malformed; it also wraps what is wrong. Nothing was
	// sent.
	ErrInvalidRequest = errors.New("catalog: invalid request to the caller")

	// ErrDuplicate, ErrCapReached, ErrInvalidName and ErrDeadOwner,
	// returned by the Start methods, are defined once, in package shardreg,
	// which returns them from below: these are the same values, so one
	// errors.Is matches either name.
	ErrDuplicate   = shardreg.ErrDuplicate
	ErrCapReached  = shardreg.ErrCapReached
	ErrInvalidName = shardreg.ErrInvalidName
	ErrDeadOwner   = shardreg.ErrDeadOwner
)

// Denied reports whether err is a refusal by a route's security plan, which
// an MCP server reports as a tool error result rather than a protocol
// error.
func Denied(err error) bool {
	return errors.Is(err, bindsec.ErrUnauthenticated) || errors.Is(err, bindsec.ErrForbidden) ||
		errors.Is(err, bindsec.ErrExpired) || errors.Is(err, bindsec.ErrNoPlan)
}

// CapabilityError is the error of a body's request to its caller for
// something the caller does not offer (Ask, Call.Sample, Call.Elicit): it
// is ErrNotSupported (errors.Is), and Capability names what was missing as
// MCP's client capabilities do, "sampling", "elicitation" or "roots". Nothing was
// sent. A body that cannot do without it returns it, wrapped or not: an
// MCP client of protocol 2026-07-28 then gets error -32021
// (MissingRequiredClientCapability) naming the capability, rather than a
// tool error (package mcpserve). A body that can do without it goes on.
type CapabilityError struct {
	Tool       string // the tool whose body asked (Call's methods); "" from Ask
	Capability string // "sampling", "elicitation" or "roots"
}

func (e *CapabilityError) Error() string {
	if e.Tool == "" {
		return "catalog: " + e.Capability + ": " + ErrNotSupported.Error()
	}
	return "catalog: tool " + quote.Name(e.Tool) + ": " + e.Capability + ": " + ErrNotSupported.Error()
}

// Unwrap makes a CapabilityError ErrNotSupported.
func (e *CapabilityError) Unwrap() error { return ErrNotSupported }
