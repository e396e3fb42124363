package bindsec

import "context"

// A vouched credential is one whose principal the process already knows,
// without the authenticator's help: a fleet replica serving a call that
// another replica forwarded gets the caller's principal in that replica's
// signed assertion, never the caller's token, and the route's plan must
// judge that principal. The credential is then an opaque handle (package
// mcpserve uses a one-way mark of the caller's token) that the catalog
// also binds tasks to, and the context says what it stands for.
//
// Only code holding the context can vouch: nothing a client sends
// reaches a context value.
type vouchKey struct{}

type vouched struct {
	credential string    // the handle vouched for
	pr         Principal // its principal; zero: refused
	alias      string    // when set: authenticate this instead
}

// WithPrincipal returns a context in which Authenticate, given
// credential, returns pr without calling the authenticator (which must
// still be configured: a nil authenticator admits no one). A zero pr
// refuses credential with ErrUnauthenticated. Another credential is
// authenticated as usual. It costs one small allocation; Authenticate
// then costs one context lookup more.
func WithPrincipal(ctx context.Context, credential string, pr Principal) context.Context {
	return context.WithValue(ctx, vouchKey{}, &vouched{credential: credential, pr: pr})
}

// WithAlias returns a context in which Authenticate, given alias,
// authenticates credential instead: a handle that stands for a token the
// process holds. Another credential is authenticated as usual.
func WithAlias(ctx context.Context, alias, credential string) context.Context {
	return context.WithValue(ctx, vouchKey{}, &vouched{credential: alias, alias: credential})
}

// vouchedFor returns what ctx vouches for credential, if anything.
func vouchedFor(ctx context.Context, credential string) (*vouched, bool) {
	if ctx == nil || credential == "" {
		return nil, false
	}
	v, ok := ctx.Value(vouchKey{}).(*vouched)
	if !ok || v.credential != credential {
		return nil, false
	}
	return v, true
}
