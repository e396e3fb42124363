package mcpserve

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
)

// The hop's authentication. Every request a replica sends to a peer's
// fleet endpoint (forwarded calls, reads, prompts, completions, tasks
// requests, the subscription relay's streams) is signed by the forwarder
// with its Identity, over a canonical message of:
//
//   - the forwarder's name, the HTTP method, the request URI, and the
//     holder's endpoint as the forwarder knows it;
//   - a timestamp and a random nonce;
//   - the SHA-256 of the body, and the routing headers (protocol,
//     Mcp-Method, Mcp-Name, the hop count);
//   - the principal assertion (hopAssertion).
//
// The holder (FleetHandler) verifies the signature (Identity.Verify),
// refuses a timestamp outside Fleet.ReplayWindow of its clock and a nonce
// it saw within the window (nonceCache), and an assertion past its
// expiry: 401 for each. Neither the fleet token nor the caller's token
// crosses the hop: the forwarder asserts the principal it authenticated,
// and a one-way mark of the caller's credential (credMark) under a key
// derived from Fleet.Token, which every replica computes alike.
const (
	hopReplicaHeader   = "Livereg-Fleet-Replica"
	hopTimeHeader      = "Livereg-Fleet-Time"
	hopNonceHeader     = "Livereg-Fleet-Nonce"
	hopEndpointHeader  = "Livereg-Fleet-Endpoint"
	hopPrincipalHeader = "Livereg-Fleet-Principal"
	hopSignatureHeader = "Livereg-Fleet-Signature"
)

// hopNonceBytes is the size of a hop request's nonce.
const hopNonceBytes = 16

// maxAssertionLife bounds how long a principal assertion is believed,
// whatever the principal's own expiry: a forwarded call is judged on it
// while it runs, and a holder must not act on a principal that the
// forwarder would no longer authenticate for long.
const maxAssertionLife = time.Minute

// defaultReplayWindow is Fleet.ReplayWindow's default.
const defaultReplayWindow = 30 * time.Second

// credMarkPrefix begins the credential a holder judges a forwarded call
// with: a mark, never a token.
const credMarkPrefix = "fleet-mark:"

// Why a hop request was refused, each answered 401 (the caller of the
// forwarder sees CodePeerUnavailable).
var (
	errHopUnsigned  = errors.New("the request is not signed by a fleet replica")
	errHopClock     = errors.New("the request's timestamp is outside the replay window")
	errHopReplayed  = errors.New("the request's nonce was seen within the replay window")
	errHopExpired   = errors.New("the principal assertion expired")
	errHopEndpoint  = errors.New("the request was signed for another endpoint")
	errHopAssertion = errors.New("the principal assertion is malformed")
)

// hopAssertion is the principal a forwarder authenticated, as the holder
// judges it. Mark is empty for an anonymous caller (no credential);
// otherwise Authenticated says whether the forwarder's authenticator took
// the credential, and Subject and Roles are its principal's.
type hopAssertion struct {
	Subject       string   `json:"s,omitempty"`
	Roles         []string `json:"r,omitempty"`
	Expires       int64    `json:"e"` // Unix milliseconds
	Mark          string   `json:"m,omitempty"`
	Authenticated bool     `json:"a,omitempty"`
}

// encode is the assertion as the header carries it.
func (a *hopAssertion) encode() string {
	b, _ := json.Marshal(a) // strings and numbers: never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeAssertion(s string) (hopAssertion, error) {
	var a hopAssertion
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &a) != nil || a.Expires == 0 || (a.Mark == "" && a.Authenticated) {
		return hopAssertion{}, errHopAssertion
	}
	return a, nil
}

// credential and principal are what the holder judges the call on: the
// mark as the credential, and the asserted principal (zero when the
// forwarder's authenticator refused the caller's credential).
func (a *hopAssertion) credential() string {
	if a.Mark == "" {
		return ""
	}
	return credMarkPrefix + a.Mark
}

func (a *hopAssertion) principal() bindsec.Principal {
	if !a.Authenticated {
		return bindsec.Principal{}
	}
	return bindsec.NewPrincipal(a.Subject, a.Roles...).WithExpires(time.UnixMilli(a.Expires))
}

// hopSigner signs a replica's hop requests, and marks credentials. Safe
// for concurrent use.
type hopSigner struct {
	id      Identity
	markKey []byte
	auth    bindsec.Authenticator // the catalog's, to assert principals with
}

// deriveMarkKey derives the credential-mark key from the fleet token.
func deriveMarkKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("livereg fleet credential mark v1"))
	return m.Sum(nil)
}

// markCredential is the credential a fleet replica hands its catalog for
// a caller's token: a one-way mark of it, the same on every replica of
// the fleet, so that a task or a requestState bound to it on one replica
// is the same caller's on another. "" stays "". It costs one HMAC.
func (g *hopSigner) markCredential(token string) string {
	if token == "" {
		return ""
	}
	m := hmac.New(sha256.New, g.markKey)
	m.Write([]byte(token))
	return credMarkPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// assert builds the assertion of a caller whose credential (as
// markCredential made it) is cred, authenticating it in ctx (which holds
// what it stands for: bindsec.WithAlias locally, bindsec.WithPrincipal on
// a holder) at now. An authenticator that panicked fails the forward.
func (g *hopSigner) assert(ctx context.Context, cred string, now time.Time) (string, error) {
	a := hopAssertion{Expires: now.Add(maxAssertionLife).UnixMilli()}
	if mark, ok := strings.CutPrefix(cred, credMarkPrefix); ok {
		a.Mark = mark
		pr, err := bindsec.Authenticate(ctx, g.auth, cred)
		switch {
		case errors.Is(err, bindsec.ErrAuthenticatorPanicked):
			return "", err
		case err == nil:
			a.Authenticated, a.Subject = true, pr.Subject()
			for r := range pr.Roles() {
				a.Roles = append(a.Roles, r)
			}
			if exp := pr.Expires(); !exp.IsZero() && exp.UnixMilli() < a.Expires {
				a.Expires = exp.UnixMilli()
			}
		}
	}
	return a.encode(), nil
}

// anonymous is the assertion of a request no caller is behind (the
// subscription relay's streams), at now.
func anonymous(now time.Time) string {
	return (&hopAssertion{Expires: now.Add(maxAssertionLife).UnixMilli()}).encode()
}

// hopMessage is the canonical message a hop request's signature covers.
// No field can hold a newline (header values, a request URI, base64), so
// the fields cannot run into each other.
func hopMessageOf(h http.Header, method, uri string, bodySum [sha256.Size]byte) []byte {
	var b strings.Builder
	b.Grow(512)
	b.WriteString("livereg fleet hop v1\n")
	for _, v := range []string{
		h.Get(hopReplicaHeader), method, uri, h.Get(hopEndpointHeader),
		h.Get(hopTimeHeader), h.Get(hopNonceHeader),
		base64.RawURLEncoding.EncodeToString(bodySum[:]),
		h.Get(protocolHeader), h.Get(methodHeader), h.Get(nameHeader), h.Get(hopHeader),
		h.Get(hopPrincipalHeader), h.Get(checkHeader),
	} {
		b.WriteString(v)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// sign puts on r, a request for the peer at endpoint whose body is body,
// the headers of a hop request asserting assertion, signed at now, over
// its hop count among the rest (which the caller sets first): it
// costs a nonce, a SHA-256 of the body, and one Identity.Sign.
func (g *hopSigner) sign(r *http.Request, body []byte, endpoint, assertion string, now time.Time) error {
	var nonce [hopNonceBytes]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand's doc)
	h := r.Header
	h.Del("Authorization")
	h.Del(callerHeader)
	h[hopReplicaHeader] = []string{g.id.Self()}
	h[hopEndpointHeader] = []string{endpoint}
	h[hopTimeHeader] = []string{strconv.FormatInt(now.UnixMilli(), 10)}
	h[hopNonceHeader] = []string{base64.RawURLEncoding.EncodeToString(nonce[:])}
	h[hopPrincipalHeader] = []string{assertion}
	sig, err := g.id.Sign(hopMessageOf(h, r.Method, r.URL.RequestURI(), sha256.Sum256(body)))
	if err != nil {
		return fmt.Errorf("mcpserve: signing a fleet request: %w", err)
	}
	h[hopSignatureHeader] = []string{base64.RawURLEncoding.EncodeToString(sig)}
	return nil
}

// hopVerifier is the holder's half: it checks a hop request's headers
// (check) before its body is read, then its signature and nonce (verify).
type hopVerifier struct {
	id     Identity
	self   endpointKey // this replica's advertised endpoint
	isSelf bool
	window time.Duration
	nonces *nonceCache
	now    func() time.Time // time.Now; tests set another
}

// hopCheck is what check read of a request.
type hopCheck struct {
	replica string
	at      time.Time
	nonce   [hopNonceBytes]byte
	sig     []byte
	assert  hopAssertion
}

// check reads and checks what a hop request carries beside its body.
func (v *hopVerifier) check(h http.Header) (hopCheck, error) {
	var c hopCheck
	for _, k := range []string{hopReplicaHeader, hopTimeHeader, hopNonceHeader, hopEndpointHeader, hopPrincipalHeader, hopSignatureHeader} {
		if len(h.Values(k)) != 1 {
			return c, errHopUnsigned
		}
	}
	c.replica = h.Get(hopReplicaHeader)
	ms, err := strconv.ParseInt(h.Get(hopTimeHeader), 10, 64)
	if err != nil {
		return c, errHopUnsigned
	}
	c.at = time.UnixMilli(ms)
	nonce, err := base64.RawURLEncoding.DecodeString(h.Get(hopNonceHeader))
	if err != nil || len(nonce) != hopNonceBytes {
		return c, errHopUnsigned
	}
	copy(c.nonce[:], nonce)
	if c.sig, err = base64.RawURLEncoding.DecodeString(h.Get(hopSignatureHeader)); err != nil {
		return c, errHopUnsigned
	}
	if v.isSelf {
		if ep, err := parseEndpoint(h.Get(hopEndpointHeader)); err != nil || ep != v.self {
			return c, errHopEndpoint
		}
	}
	now := v.now()
	if d := now.Sub(c.at); d > v.window || d < -v.window {
		return c, errHopClock
	}
	if c.assert, err = decodeAssertion(h.Get(hopPrincipalHeader)); err != nil {
		return c, err
	}
	if !now.Before(time.UnixMilli(c.assert.Expires)) {
		return c, errHopExpired
	}
	return c, nil
}

// verify checks the signature of a request that check took, over its
// body, and records its nonce: an error wrapping the Identity's for a
// bad signature, errHopReplayed for a nonce seen, errNoncesFull when
// the nonces of the window take all the room there is.
func (v *hopVerifier) verify(c *hopCheck, r *http.Request, body []byte) error {
	msg := hopMessageOf(r.Header, r.Method, r.URL.RequestURI(), sha256.Sum256(body))
	if err := v.id.Verify(c.replica, msg, c.sig); err != nil {
		return fmt.Errorf("%w: %w", errHopUnsigned, err)
	}
	return v.nonces.add(c.nonce, c.at.Add(v.window), v.now())
}

// hopCaller is the caller of a request forwarded here, as the holder
// judges it: the credential (a mark) and its principal. FleetHandler puts
// it in the request's context.
type hopCaller struct {
	cred string
	pr   bindsec.Principal
}

type hopCallerKey struct{}

// hopRealm is the auth scheme of a hop refusal's challenge, which tells
// it from a caller's refusal (exposure.go's Bearer challenge).
const hopRealm = "Livereg-Fleet"

// hopRefusal writes the 401 of a hop request refused for err, which
// names no secret (the replica's name is quoted, truncated).
func hopRefusal(w http.ResponseWriter, replica string, err error) {
	if errors.Is(err, errNoncesFull) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("WWW-Authenticate", hopRealm+` realm="livereg-fleet"`)
	msg := "Unauthorized: " + err.Error()
	if replica != "" && !errors.Is(err, ErrUnknownReplica) && !errors.Is(err, ErrBadSignature) {
		msg += " (replica " + quote.Name(replica) + ")"
	}
	http.Error(w, msg, http.StatusUnauthorized)
}
