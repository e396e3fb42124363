package mcpserve

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/owner"
)

// A subscription is judged by the plan of the route that serves its URI,
// as a read of it is: resources/subscribe, and each resource subscription
// of subscriptions/listen, run that plan for the caller's credential
// (catalog.AuthorizeResource) before anything is recorded, and a denied
// caller gets the error its resources/read would get. What the plan
// admitted is kept with the subscription as a grant: the credential, the
// principal's expiry, and the owner whose plan judged it.
//
// An update is delivered only to grants that still pass. Checking every
// subscriber on every update would call the authenticator per update, so
// the table re-judges only what may have changed: each URI remembers the
// catalog's resource version its grants were last confirmed at and the
// soonest expiry among them. An update of a URI whose version and clock
// both still fall short costs a version read, a lookup and at most a
// clock read; otherwise the owner is looked up, and the grants judged by
// another owner's plan, or whose principal has expired, are judged again
// (the plan of a route never changes: a new plan is a new owner, which
// moves the version). A grant that no longer passes is dropped, from this
// table and the SDK's, before the update goes out: the subscriber hears
// nothing more of the URI, and is not told; a resources/read tells it
// why. A subscription another replica's stream holds here was judged by
// that replica and is not judged again (fleetsubs.go).

// grant is what the plan admitted for one (session, URI) subscription.
type grant struct {
	cred    string    // the credential presented; "" for none
	expires time.Time // the principal's expiry; zero for none
	by      owner.Ref // the owner whose plan judged it
	peer    bool      // held by another replica's stream: not judged here
	remote  bool      // judged by the replica that serves the URI (fleetsubjudge.go)
	// pr, for a credential that is a fleet's mark of the caller's, is
	// the principal the plan judged: a mark authenticates nothing by
	// itself, so a re-judgment judges that principal (until its expiry)
	// under the new plan. Zero otherwise: the credential is authenticated
	// again.
	pr bindsec.Principal
}

// vouchable returns pr if cred is a fleet's mark (hopsign.go) and pr a
// principal, and the zero principal otherwise.
func vouchable(cred string, pr bindsec.Principal) bindsec.Principal {
	if strings.HasPrefix(cred, credMarkPrefix) && pr.Subject() != "" {
		return pr
	}
	return bindsec.Principal{}
}

// listenCredKey carries the credential of a subscriptions/listen to the
// subscribes the SDK makes for its resource subscriptions, which carry no
// request extra of their own.
type listenCredKey struct{}

// version is the catalog's resource version: it moves whenever the route
// that serves a URI may have changed hands.
func (t *subscriptions) version() uint64 {
	return t.cat.Resources().Version() + t.cat.Templates().Version()
}

// judge runs the plan of uri's route for the subscribe req, and returns
// the grant, or the error to answer: the JSON-RPC error a read would get,
// or, wrapping catalog.ErrNotFound, the catalog's own when no local route
// serves uri (the caller looks among the peers).
func (t *subscriptions) judge(ctx context.Context, req *mcp.SubscribeRequest, fromPeer bool) (grant, error) {
	uri := req.Params.URI
	if fromPeer {
		o, ok := t.cat.ResourceOwner(uri)
		if !ok {
			return grant{}, catalog.ErrNotFound
		}
		return grant{by: o, peer: true}, nil
	}
	ctx, cred := t.credential(ctx, req)
	o, pr, err := t.cat.AuthorizeResource(ctx, uri, cred)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return grant{}, err
	case err != nil:
		return grant{}, t.refuse(ctx, uri, err)
	}
	return grant{cred: cred, expires: pr.Expires(), by: o, pr: vouchable(cred, pr)}, nil
}

// credential is what the subscribe req presents to the routes' plans,
// and a context that vouches for it (in a fleet the credential is a mark
// of the caller's: dispatch.go's credential).
func (t *subscriptions) credential(ctx context.Context, req *mcp.SubscribeRequest) (context.Context, string) {
	if c, ok := ctx.Value(listenCredKey{}).(string); ok {
		return ctx, c
	}
	if t.credOf != nil {
		return t.credOf(ctx, req)
	}
	return ctx, ""
}

// refuse maps a refused judgment onto the wire as resources/read does.
func (t *subscriptions) refuse(ctx context.Context, uri string, err error) error {
	if t.readError != nil {
		return t.readError(ctx, uri, err)
	}
	return err
}

// grantLocked records g for (ss, uri) in us, and the soonest expiry.
func (us *uriSubs) grantLocked(ss *mcp.ServerSession, g grant) {
	us.sessions[ss] = g
	if !g.expires.IsZero() && (us.soonest.IsZero() || g.expires.Before(us.soonest)) {
		us.soonest = g.expires
	}
}

// deliver sends an update of uri to its subscribers whose grants still
// pass: it re-judges first when stale says so.
func (t *subscriptions) deliver(uri string) {
	if v, stale := t.stale(uri); stale {
		t.rejudge(uri, v)
	}
	t.send(uri)
}

// stale reports whether some grant of uri may no longer pass: the
// catalog's version moved since they were confirmed, or the soonest
// expiry has come. It returns the version read first.
func (t *subscriptions) stale(uri string) (uint64, bool) {
	v := t.version()
	t.mu.Lock()
	defer t.mu.Unlock()
	us := t.byURI[uri]
	if us == nil {
		return v, false
	}
	expiring := !us.soonest.IsZero() && !t.now().Before(us.soonest)
	if us.peer != nil {
		return v, expiring // another replica's plan: see fleetsubjudge.go
	}
	return v, us.gen != v || expiring
}

// rejudge judges again the grants of uri that another owner's plan
// judged, or whose principal has expired, at version v, and drops those
// that no longer pass. The lookups and the authenticator's calls run with
// no lock held, on run's goroutine: a slow authenticator delays the
// updates queued behind, at each expiry or change of owner only.
func (t *subscriptions) rejudge(uri string, v uint64) {
	cur, served := t.cat.ResourceOwner(uri)
	type verdict struct {
		ss      *mcp.ServerSession
		cred    string
		expired bool
		g       grant
		err     error
	}
	var vs []verdict
	t.mu.Lock()
	now := t.now()
	if us := t.byURI[uri]; us != nil {
		for ss, g := range us.sessions {
			expired := !g.expires.IsZero() && !now.Before(g.expires)
			switch {
			case us.peer != nil && expired:
				// Served by another replica, whose plan this one
				// cannot run: an expired principal is refused by any
				// plan that needed a credential.
				vs = append(vs, verdict{ss: ss, cred: g.cred, expired: true, err: bindsec.ErrExpired})
			case g.peer || us.peer != nil || !expired && (!served || g.by.Same(cur)):
			default:
				vs = append(vs, verdict{ss: ss, cred: g.cred, expired: expired, g: g})
			}
		}
	}
	t.mu.Unlock()
	for i := range vs {
		if vs[i].err != nil {
			continue
		}
		ctx := context.Background()
		if old := vs[i].g.pr; old.Subject() != "" {
			ctx = bindsec.WithPrincipal(ctx, vs[i].cred, old)
		}
		o, pr, err := t.cat.AuthorizeResource(ctx, uri, vs[i].cred)
		vs[i].g, vs[i].err = grant{cred: vs[i].cred, expires: pr.Expires(), by: o, pr: vs[i].g.pr}, err
	}
	var dropped []*mcp.ServerSession
	t.sdk.Lock()
	defer t.sdk.Unlock()
	t.mu.Lock()
	us := t.byURI[uri]
	if us == nil {
		t.mu.Unlock()
		return
	}
	for _, vd := range vs {
		if g, held := us.sessions[vd.ss]; !held || g.cred != vd.cred {
			continue // unsubscribed, or subscribed again, meanwhile
		}
		switch {
		case vd.err == nil:
			us.sessions[vd.ss] = vd.g
		case !vd.expired && (errors.Is(vd.err, catalog.ErrNotFound) || errors.Is(vd.err, catalog.ErrRouteGone)):
			// The route is changing hands: the re-check (subindex.go)
			// follows it, and the next update judges again. An expired
			// grant is dropped all the same: only a plan that is not
			// public gives one an expiry, and such a plan refuses it.
		default:
			dropped = append(dropped, vd.ss)
		}
	}
	for _, ss := range dropped {
		t.forgetLocked(ss, uri)
	}
	if us = t.byURI[uri]; us != nil {
		us.soonest = time.Time{}
		for _, g := range us.sessions {
			if !g.expires.IsZero() && (us.soonest.IsZero() || g.expires.Before(us.soonest)) {
				us.soonest = g.expires
			}
		}
		us.gen = v
	}
	t.mu.Unlock()
	for _, ss := range dropped {
		t.sdkForget(ss, uri)
	}
	t.rejudged.Add(uint64(len(vs)))
}
