package mcpserve

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
)

// A subscription to a URI another replica serves is judged by that
// replica's plan for the caller, as a read forwarded there would be. The
// stream that carries the URI (fleetsubs.go) is one per peer, opened
// with the fleet credential for every subscriber of this replica, and
// the peer does not judge what it carries: so before the table records
// the subscription, this replica opens a short listen of the URI at the
// peer that presents the caller's credential as a forwarded call does
// (a signed assertion of its principal), marked with checkHeader. The peer judges that listen
// as a client's own (subjudge.go): a refusal comes back as the error
// the caller's resources/read would get there, and is this subscribe's
// answer; an acknowledgement admits the subscription, and the check's
// stream is closed at once. It costs one more request to the peer per
// subscribe to a remote URI, within Fleet.ForwardTimeout.
//
// The grant keeps the expiry of the principal this replica's own
// authenticator finds for the credential, if it knows it: once that has
// passed, the next update drops the grant without asking the peer, as
// an expired principal passes no plan that needs a credential. A change
// of the peer's owner is not judged again here (the peer's stream
// carries no caller).

// checkHeader marks a peer's listen that judges one caller's subscribe,
// rather than carries the peer's subscriptions: the replica that serves
// it judges it by the caller the forwarder asserted. Only a request whose
// signature FleetHandler verified is read for it, and the signature
// covers the mark (hopMessageOf).
const checkHeader = "Livereg-Fleet-Subscribe-Check"

// judgedAtKey marks the context of a subscribe whose URI, its value,
// the serving replica has judged already (prepare).
type judgedAtKey struct{}

// errChecked ends the stream of a check once acknowledged.
var errChecked = errors.New("mcpserve: subscription judged")

// callerCheck is the caller a peer's listen judges: its credential (a
// mark, dispatch.go's fleetCredential) and the context that says what the
// mark stands for, in which the hop's assertion authenticates it.
type callerCheck struct {
	ctx  context.Context
	cred string
}

// isCheck reports whether a forwarded listen with header h judges a
// caller's subscribe (see checkHeader).
func isCheck(h http.Header) bool { return len(h[checkHeader]) > 0 }

// remoteGrant is the grant of a subscribe the peer admitted for cred.
func (t *subscriptions) remoteGrant(ctx context.Context, cred string) grant {
	g := grant{cred: cred, remote: true}
	if cred != "" && bindsec.Configured(t.cat.Authenticator()) {
		if pr, err := bindsec.Authenticate(ctx, t.cat.Authenticator(), cred); err == nil {
			g.expires = pr.Expires()
		}
	}
	return g
}

// judgeAt has the replica at ep judge cred's subscribe to uri by its
// route's plan: nil when admitted, the replica's JSON-RPC error when
// refused (the error a read there would get), or CodePeerUnavailable.
func (fs *fleetSubs) judgeAt(ctx context.Context, ep, uri, cred string) error {
	type result struct {
		s   *listenStream
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := fs.openAs(&peerStream{endpoint: ep}, []string{uri}, &callerCheck{ctx: ctx, cred: cred})
		done <- result{s, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "resource subscription: request ended: " + context.Cause(ctx).Error()}
	}
	if r.err != nil {
		var ref *peerRefusal
		if errors.As(r.err, &ref) {
			return mcp.ResourceNotFoundError(uri)
		}
		return fs.unavailable(uri, r.err)
	}
	if _, ok := r.s.agreed[uri]; !ok {
		return fs.unavailable(uri, errNotAcknowledged)
	}
	return nil
}
