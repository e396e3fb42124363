package etcdfleet

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// MinTokenBytes is the shortest fleet token (Config.Token and each of
// Config.PreviousTokens) a Config accepts: the same floor as
// mcpserve.MinFleetTokenBytes, since it is the same credential.
const MinTokenBytes = 16

// Errors a follower's check of a record gives, wrapped with the reason.
var (
	// errForged: the record carries no signature, or none by the
	// enrolled, unrevoked key of the replica it names for this key,
	// lease and content, or an endpoint other than that replica's
	// enrolled one.
	errForged = errors.New("not signed by the replica it names")
	// errInvalidRecord: the record is signed but is no valid route for
	// its key (see validRecord), or is not a record at all.
	errInvalidRecord = errors.New("invalid record")
)

// recordMessage is what a record's signature covers: the key, the lease
// the key is attached to and the record's canonical body. The key and the
// lease are part of it, so that a genuine value copied under another key,
// or put again without its lease (which would detach it from the session
// whose end must delete it), does not verify.
func recordMessage(key string, lease int64, body []byte) []byte {
	return frame(recordDomain, []byte(key), binary.BigEndian.AppendUint64(nil, uint64(lease)), body)
}

// seal returns the value a claim writes for rec on key under lease: rec
// in its canonical encoding (see canonical) with its Ed25519 signature by
// priv, the writing replica's own key, in the "sig" field. The value is
// what open accepts.
func seal(priv ed25519.PrivateKey, key string, lease int64, rec Record) (string, error) {
	rec, body, err := canonical(rec)
	if err != nil {
		return "", err
	}
	rec.Sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, recordMessage(key, lease, body)))
	val, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	return string(val), nil
}

// canonical returns rec as a follower will decode it, and the encoding
// that is signed: rec with an empty signature, encoded, decoded and encoded
// again. encoding/json is deterministic, but not idempotent on every
// input (invalid UTF-8 becomes U+FFFD, raw schemas are compacted); one
// round trip reaches the form every later one keeps.
func canonical(rec Record) (Record, []byte, error) {
	rec.Sig = ""
	b, err := json.Marshal(rec)
	if err != nil {
		return Record{}, nil, err
	}
	var out Record
	if err := json.Unmarshal(b, &out); err != nil {
		return Record{}, nil, err
	}
	if b, err = json.Marshal(out); err != nil {
		return Record{}, nil, err
	}
	return out, b, nil
}

// open decodes the value of key, attached to lease, and checks its
// signature against the key enrolled for the replica it names (lookup):
// what is checked is the re-encoding of the decoded record, so that only
// what was decoded, which is all a follower ever uses, is trusted,
// whatever the value's JSON looked like. The record's endpoint must be
// the one the replica enrolled. Errors wrap errForged (and, from lookup,
// ErrNotEnrolled or ErrRevoked) or errInvalidRecord.
//
// Cost: a JSON decode and encode of the record and one Ed25519
// verification (BenchmarkVerifyRecord); it runs on the follower only,
// once per record listed or watched, never on a call's path.
func open(key string, lease int64, val []byte, lookup func(replica string) (enrolled, error)) (Record, error) {
	var rec Record
	if err := json.Unmarshal(val, &rec); err != nil {
		return Record{}, fmt.Errorf("%w: not a JSON record", errInvalidRecord)
	}
	if rec.Sig == "" {
		return Record{}, fmt.Errorf("%w: no signature", errForged)
	}
	sig, err := base64.RawURLEncoding.DecodeString(rec.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Record{}, fmt.Errorf("%w: a malformed signature", errForged)
	}
	rec.Sig = ""
	body, err := json.Marshal(rec)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", errInvalidRecord, err)
	}
	ent, err := lookup(rec.Replica)
	switch {
	case err != nil:
		return Record{}, fmt.Errorf("%w: %w", errForged, err)
	case !ed25519.Verify(ent.pub, recordMessage(key, lease, body), sig):
		return Record{}, fmt.Errorf("%w: the signature is not the enrolled key's", errForged)
	case rec.Endpoint != ent.endpoint:
		return Record{}, fmt.Errorf("%w: an endpoint other than the replica's enrolled one", errForged)
	}
	return rec, nil
}
