package mcpserve

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MinRequestStateKeyBytes is the shortest Options.RequestStateKey New
// accepts.
const MinRequestStateKeyBytes = 32

// DefaultRequestStateTTL is how long a requestState is accepted after it
// was issued when Options.RequestStateTTL is 0: long enough for a person
// to fill in a form, short enough that a leaked state soon stops working.
const DefaultRequestStateTTL = 5 * time.Minute

// maxRequestState bounds a requestState, issued or presented: it carries
// every answer of a call's earlier rounds.
const maxRequestState = 256 << 10

// A requestState (MCP 2026-07-28, SEP-2322) is what the server asks the
// client to echo in the next round of a call. The server keeps nothing
// between rounds: the state carries what the next round needs, sealed
// with an HMAC-SHA256 under the server's key, so that a client can read it
// but not forge or alter it. It is
//
//	base64url(payload) "." base64url(HMAC-SHA256(key, base64url(payload)))
//
// and the payload, JSON, binds the state to one call: the method and the
// route's name (or URI), a hash of the call's arguments (argsDigest), the
// consumer instance whose body asked (catalog.InputRequiredError.Instance),
// the caller, as an HMAC of its credential under the same key, the round
// that issued it (1 for the first) and when it expires. So a state is good
// only for the retry of the call it was issued for, by its caller, for
// Options.RequestStateTTL: presented with other arguments, on another
// route, by another caller or late, it is refused. It also holds what the
// last round asked, to read and check the answers with, and every answer
// so far.
type roundState struct {
	Method   string                  `json:"m"`
	Name     string                  `json:"n"`
	Args     string                  `json:"h"`
	Instance string                  `json:"i"`
	Caller   string                  `json:"c"`
	Round    int                     `json:"r"`
	Expires  int64                   `json:"e"` // Unix milliseconds
	Asked    map[string]askedInput   `json:"q"`
	Answers  map[string]storedAnswer `json:"a,omitempty"`
}

// askedInput is one question of the last round: its method and, for a
// form, the schema its answer must match.
type askedInput struct {
	Method string          `json:"m"`
	Schema json.RawMessage `json:"s,omitempty"`
}

// storedAnswer is one answer of an earlier round, as the client sent it.
type storedAnswer struct {
	Method string          `json:"m"`
	Value  json.RawMessage `json:"v"`
}

// roundKeys are the keys a Server seals requestStates with: sign, and
// every key it accepts, sign first; with how long a state lives and the
// clock that says when it expires (time.Now but in tests).
type roundKeys struct {
	sign   []byte
	accept [][]byte
	ttl    time.Duration
	now    func() time.Time
}

// errStateTampered: a requestState that no key of this server sealed.
var errStateTampered = errors.New("requestState failed its integrity check")

// newRoundKeys resolves the keys: Options.RequestStateKey; else, serving a
// fleet, keys derived from the fleet credentials, which every replica
// shares, so that a retry may reach the holder through any replica; else
// a random key of this Server's own.
func newRoundKeys(opts Options) (*roundKeys, error) {
	if opts.RequestStateTTL < 0 {
		return nil, fmt.Errorf("%w: negative request state TTL %v", ErrInvalidOptions, opts.RequestStateTTL)
	}
	k, err := roundKeysOf(opts)
	if err != nil {
		return nil, err
	}
	k.ttl, k.now = cmpOr(opts.RequestStateTTL, DefaultRequestStateTTL), time.Now
	return k, nil
}

func roundKeysOf(opts Options) (*roundKeys, error) {
	switch {
	case opts.RequestStateKey != nil:
		if len(opts.RequestStateKey) < MinRequestStateKeyBytes {
			return nil, fmt.Errorf("%w: a request state key of %d bytes; at least %d", ErrInvalidOptions, len(opts.RequestStateKey), MinRequestStateKeyBytes)
		}
		k := append([]byte(nil), opts.RequestStateKey...)
		return &roundKeys{sign: k, accept: [][]byte{k}}, nil
	case opts.Fleet != nil:
		k := &roundKeys{sign: deriveStateKey(opts.Fleet.Token)}
		k.accept = append(k.accept, k.sign)
		for _, t := range opts.Fleet.PreviousTokens {
			k.accept = append(k.accept, deriveStateKey(t))
		}
		return k, nil
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand's doc)
	return &roundKeys{sign: k, accept: [][]byte{k}}, nil
}

// deriveStateKey derives a requestState key from a fleet credential, so
// that the credential itself never keys anything but the fleet handler.
func deriveStateKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("livereg requestState key v1"))
	return m.Sum(nil)
}

func stateMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// callerMark is the caller's credential as a state binds it: an HMAC
// under key, so that the state, which the client reads, does not carry
// the credential or a plain hash of it.
func callerMark(key []byte, credential string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("caller\x00"))
	m.Write([]byte(credential))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// seal encodes st under the signing key.
func (k *roundKeys) seal(st *roundState) (string, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding.EncodeToString(payload)
	if len(enc) > maxRequestState-44 {
		return "", fmt.Errorf("the answers so far take more than %d bytes", maxRequestState)
	}
	return enc + "." + base64.RawURLEncoding.EncodeToString(stateMAC(k.sign, enc)), nil
}

// open checks and decodes a requestState, and returns the key that sealed
// it; errStateTampered for one no accepted key sealed.
func (k *roundKeys) open(s string) (*roundState, []byte, error) {
	if len(s) > maxRequestState {
		return nil, nil, fmt.Errorf("requestState is longer than %d bytes", maxRequestState)
	}
	enc, sig, ok := strings.Cut(s, ".")
	if !ok {
		return nil, nil, errStateTampered
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return nil, nil, errStateTampered
	}
	for _, key := range k.accept {
		if !hmac.Equal(mac, stateMAC(key, enc)) {
			continue
		}
		payload, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return nil, nil, errStateTampered
		}
		st := new(roundState)
		if err := json.Unmarshal(payload, st); err != nil {
			return nil, nil, errStateTampered
		}
		return st, key, nil
	}
	return nil, nil, errStateTampered
}

// callArgs are a call's arguments as a round binds them: a tool call's
// raw JSON, or a prompt's map; neither for a read. A struct rather than
// an interface, so that passing a tool's slice costs no allocation.
type callArgs struct {
	raw    json.RawMessage
	prompt map[string]string
}

// argsDigest is what a requestState binds of a call's arguments: a
// SHA-256 of their canonical JSON, so that a retry that encodes the same
// arguments otherwise (key order, spacing, escapes), as a forwarding
// replica or another client library may, still matches. No arguments,
// null and an empty object are one. Arguments that do not decode are
// hashed as they came (the catalog refuses them anyway). It costs a
// decoding and an encoding of the arguments, paid only by a round that
// asks or retries.
func argsDigest(args callArgs) string {
	var canon []byte
	switch {
	case args.raw != nil:
		canon = canonicalJSON(args.raw)
	case len(args.prompt) != 0:
		canon, _ = json.Marshal(args.prompt) // strings always encode; keys sorted
	}
	if len(canon) == 0 || string(canon) == "null" {
		canon = []byte("{}")
	}
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// canonicalJSON re-encodes raw with its object keys sorted, its numbers
// as written and no spacing; raw itself when it does not decode.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	if _, err := dec.Token(); err != io.EOF {
		return raw // trailing data: not one value
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}
