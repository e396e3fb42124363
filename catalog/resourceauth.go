package catalog

import (
	"context"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/owner"
)

// AuthorizeResource runs the plan of the route that ResourceOwner names
// for uri, the one a read of uri reaches here, for credential, and reads
// nothing: it returns that route's owner and the principal the plan
// admitted (the zero Principal for a public plan), or the error a read
// would have met before its gate: ErrNotFound, ErrInvalidArguments for a URI or
// template variables the read would refuse, a denial (see Denied), an
// *bindsec.AuthenticatorPanic, or ErrRouteGone when the route left the
// name while its plan was judged. A server asks it before it lets a
// client follow uri, and again when the owner serving uri changes or the
// principal expires, so that nobody hears of a resource they may not
// read.
//
// It is safe for concurrent use; it costs ResourceOwner's lookup and the
// plan's check: for a plan that is not public, the authenticator's call.
// Unlike a read it counts nothing in Stats: it is not a call.
func (c *Catalog) AuthorizeResource(ctx context.Context, uri, credential string) (owner.Ref, bindsec.Principal, error) {
	var pr bindsec.Principal
	if err := c.checkURI(uri); err != nil {
		return owner.Ref{}, pr, err
	}
	if rt, o, ok := c.resources.reg.Lookup(uri); ok {
		if err := c.guard(ctx, rt, credential, &pr); err != nil {
			return owner.Ref{}, bindsec.Principal{}, err
		}
		return o, pr, nil
	}
	// As ResourceOwner, the fleet's rule (servedElsewhere) is left to
	// the server, which looks the URI up among its peers itself.
	tr, vars := c.index.match(c, uri)
	if tr == nil {
		return owner.Ref{}, pr, &unknownError{"resource", uri}
	}
	if err := tr.checkVars(vars); err != nil {
		return owner.Ref{}, pr, err
	}
	if err := c.guard(ctx, tr.rt, credential, &pr); err != nil {
		return owner.Ref{}, bindsec.Principal{}, err
	}
	return tr.rt.ref, pr, nil
}
