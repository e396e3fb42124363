package catalog

import (
	"fmt"

	"github.com/livereg/livereg/internal/quote"
)

// A body can leave its frame three ways: it returns, it panics, or it
// ends its goroutine with runtime.Goexit. The last two are unwinds, and
// ADR-0068 has an unwound consumer die. route.finish, deferred right after
// the admission, tells them apart as golang.org/x/sync/singleflight does:
// recover() names a panic, and a flag that the frame sets when the body
// returned (bodyReturned) names a normal return; neither is a Goexit,
// which no deferred call can stop, but which runs them all, so the gate,
// the limiter and a task's record are released on every way out.

// panicError is what the caller of a body that panicked gets: it matches
// ErrRoutePanicked and, when the panic's value is an error, that value,
// so that errors.Is and errors.As reach it; its text quotes only the
// start of the value (the log has the rest, see countDeath).
type panicError struct {
	msg   string
	value error // the panic's value, when it is an error
}

func (e *panicError) Error() string { return e.msg }

func (e *panicError) Unwrap() []error {
	if e.value == nil {
		return []error{ErrRoutePanicked}
	}
	return []error{ErrRoutePanicked, e.value}
}

// panicErr is the caller's error for a body of rt that panicked with p,
// whose value formats as v.
func (rt *route) panicErr(p any, v string) error {
	e := &panicError{msg: fmt.Sprintf("catalog: %s %q: %v: %s", rt.side.kind, rt.name, ErrRoutePanicked, quote.Name(v))}
	e.value, _ = p.(error)
	return e
}

// exitErr is the error of a body of rt that called runtime.Goexit.
func (rt *route) exitErr() error {
	return fmt.Errorf("catalog: %s %q: %w (%w)", rt.side.kind, rt.name, ErrRouteExited, ErrRoutePanicked)
}
