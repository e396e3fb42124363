package etcdfleet

import (
	"errors"

	"github.com/livereg/livereg/catalog"
)

// Errors returned by the package, wrapped with context; match them with
// errors.Is. A claim refused because another owner holds the name is
// catalog.ErrDuplicate, and a name that makes no valid key is
// catalog.ErrInvalidName, so that a catalog's caller needs no etcdfleet
// import to tell them apart.
var (
	// ErrInvalidConfig: a Config field is out of range (a bad prefix, an
	// endpoint that is not a URL etcd accepts, a TTL under a second).
	ErrInvalidConfig = errors.New("etcdfleet: invalid config")
	// ErrUnavailable: the cluster did not answer in time (Join's ctx
	// ended first, or a claim's). Nothing was claimed or joined.
	ErrUnavailable = errors.New("etcdfleet: cluster unavailable")
	// ErrSessionLost: the replica's session ended while a claim was being
	// made; the claim was given up. A new session is being opened, and a
	// retry may succeed.
	ErrSessionLost = errors.New("etcdfleet: session lost")
	// ErrClosed: the replica was closed.
	ErrClosed = errors.New("etcdfleet: replica closed")
	// ErrNotEnrolled: no enrollment signed by the fleet authority names
	// the replica (Verify, Revoke, a record's check).
	ErrNotEnrolled = errors.New("etcdfleet: replica not enrolled")
	// ErrRevoked: the replica's key is revoked (Verify, a record's check;
	// Join and a new session of the revoked process itself).
	ErrRevoked = errors.New("etcdfleet: replica key revoked")
	// ErrBadSignature: a signature that is not the replica's (Verify).
	ErrBadSignature = errors.New("etcdfleet: bad signature")
)

var (
	errDuplicate    = catalog.ErrDuplicate
	errCapReached   = catalog.ErrCapReached
	errInvalidName  = catalog.ErrInvalidName
	errInvalidRoute = catalog.ErrInvalidRoute
)
