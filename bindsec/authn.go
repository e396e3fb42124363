package bindsec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
)

var (
	// ErrInvalidAuthenticator: an Authenticator interface holds a nil
	// pointer (or another nil value) of a concrete type. Such a value is
	// not a nil interface, so it would pass "is an authenticator
	// configured?" checks and then fail on the first credential.
	ErrInvalidAuthenticator = errors.New("bindsec: invalid authenticator")
	// ErrAuthenticatorPanicked: the authenticator panicked on a request.
	// The request is refused, never admitted; the error is an
	// *AuthenticatorPanic. It is an internal error, not a denial: it does
	// not wrap ErrUnauthenticated.
	ErrAuthenticatorPanicked = errors.New("bindsec: authenticator panicked")
)

// AuthenticatorPanic is the error of a request whose authenticator
// panicked. Its Error text is fixed and never includes the panic value,
// because an authenticator's panic value may quote the credential it was
// given; a server that logs the panic decides what of Value to write.
type AuthenticatorPanic struct {
	// Value is what the authenticator panicked with.
	Value any
	// Stack is the stack of the panicking goroutine.
	Stack []byte
}

// Error returns a fixed text.
func (e *AuthenticatorPanic) Error() string { return ErrAuthenticatorPanicked.Error() }

// Unwrap returns ErrAuthenticatorPanicked.
func (e *AuthenticatorPanic) Unwrap() error { return ErrAuthenticatorPanicked }

// CheckAuthenticator reports whether a may be configured as a server's
// authenticator: nil (no authenticator) and any usable value pass; an
// interface holding a nil pointer, map, slice, func or channel is refused
// with an error wrapping ErrInvalidAuthenticator. It is safe for concurrent
// use.
func CheckAuthenticator(a Authenticator) error {
	if a == nil || Configured(a) {
		return nil
	}
	return fmt.Errorf("%w: %T is nil", ErrInvalidAuthenticator, a)
}

// Configured reports whether a is an authenticator that can authenticate:
// false for a nil interface and for an interface holding a nil value of a
// concrete type. Exposure checks use it, so that a typed nil does not count
// as configured. It is safe for concurrent use.
func Configured(a Authenticator) bool {
	if a == nil {
		return false
	}
	v := reflect.ValueOf(a)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return !v.IsNil()
	}
	return true
}

// Authenticate calls a.Authenticate and turns a panic into an error
// wrapping ErrAuthenticatorPanicked (an *AuthenticatorPanic), so that a
// buggy authenticator fails the request closed instead of crashing the
// process on a goroutine that recovers nothing. A nil authenticator
// refuses with ErrUnauthenticated, as does any other error, wrapped. A
// credential that ctx vouches for (WithPrincipal, WithAlias) is resolved
// as ctx says. It is safe for concurrent use when a is.
func Authenticate(ctx context.Context, a Authenticator, credential string) (pr Principal, err error) {
	if !Configured(a) {
		return Principal{}, ErrUnauthenticated
	}
	if v, ok := vouchedFor(ctx, credential); ok {
		if v.alias == "" {
			if v.pr.IsZero() {
				return Principal{}, ErrUnauthenticated
			}
			return v.pr, nil
		}
		credential = v.alias
	}
	defer func() {
		if v := recover(); v != nil {
			pr, err = Principal{}, &AuthenticatorPanic{Value: v, Stack: debug.Stack()}
		}
	}()
	pr, err = a.Authenticate(ctx, credential)
	if err != nil {
		if !errors.Is(err, ErrUnauthenticated) {
			err = fmt.Errorf("%w: %w", ErrUnauthenticated, err)
		}
		return Principal{}, err
	}
	return pr, nil
}
