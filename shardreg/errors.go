package shardreg

import (
	"errors"

	"github.com/livereg/livereg/internal/quote"
)

// Errors returned by the registry, wrapped in an [*Error] that names the
// operation and the name; match them with [errors.Is].
var (
	// ErrDuplicate: the name is held by an entry whose owner is alive, which
	// may be the caller itself. Nothing changed.
	ErrDuplicate = errors.New("shardreg: name held by a live owner")
	// ErrCapReached: the registry holds its cap of entries, all with live
	// owners, even after every dead-owner entry was swept. Nothing changed.
	ErrCapReached = errors.New("shardreg: catalog cap reached")
	// ErrDeadOwner: the caller's owner is dead (or the zero Ref). Nothing
	// changed.
	ErrDeadOwner = errors.New("shardreg: owner is dead")
	// ErrInvalidName: the name is empty, longer than MaxNameLen bytes, not
	// valid UTF-8, or refused by the registry's validator, whose error is
	// wrapped too. Nothing changed.
	ErrInvalidName = errors.New("shardreg: invalid name")
	// ErrInvalidOption: an option given to New is out of range.
	ErrInvalidOption = errors.New("shardreg: invalid option")
	// ErrInvalidCursor: a cursor passed to Page was not made by Page.
	ErrInvalidCursor = errors.New("shardreg: invalid cursor")
)

// Error records a refused operation, the name it was for, and why. Err is
// one of the sentinel errors above, possibly wrapping a reason. Like
// os.PathError, it defers formatting until Error is called, so that a
// refusal on a hot path costs one small allocation.
type Error struct {
	Op   string // "register"
	Name string
	Err  error
}

// Error formats the refusal as "op name: reason", the name quoted.
func (e *Error) Error() string { return e.Op + " " + quote.Name(e.Name) + ": " + e.Err.Error() }

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }
