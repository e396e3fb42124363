package etcdfleet

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
)

// MinTokenBytes is the shortest fleet token (Config.Token and each of
// Config.PreviousTokens) a Config accepts: the same floor as
// mcpserve.MinFleetTokenBytes, since it is the same credential.
const MinTokenBytes = 16

// macLabel is the HKDF info that turns the fleet token into the record
// MAC key. The token also authenticates the fleet's HTTP hop; a key of
// its own for records means that a MAC never is, nor reveals, the bearer
// credential, and that a change to one use cannot weaken the other.
const macLabel = "livereg etcdfleet record MAC v1"

// Errors a follower's check of a record gives, wrapped with the reason.
var (
	// errForged: the record carries no MAC, or none that a key the
	// replica accepts (Config.Token or Config.PreviousTokens) made for
	// this key, lease and content.
	errForged = errors.New("not signed by the fleet")
	// errInvalidRecord: the record is signed but is no valid route for
	// its key (see validRecord), or is not a record at all.
	errInvalidRecord = errors.New("invalid record")
)

// macKeys holds the record MAC keys derived from the fleet tokens: the
// first signs and verifies, the rest (from Config.PreviousTokens) only
// verify. Immutable after newMACKeys, so safe for concurrent use.
type macKeys [][]byte

func newMACKeys(token string, previous []string) (macKeys, error) {
	keys := make(macKeys, 0, 1+len(previous))
	for _, t := range append([]string{token}, previous...) {
		k, err := hkdf.Key(sha256.New, []byte(t), nil, macLabel, sha256.Size)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// sum is the MAC under k of a record body for key, attached to lease. The
// key and the lease are part of what is signed, so that a genuine value
// copied under another key, or put again without its lease (which would
// detach it from the session whose end must delete it), does not verify.
// Lengths are fixed or prefixed, so no two inputs share an encoding.
func sum(h hash.Hash, key string, lease int64, body []byte) []byte {
	var hdr [16]byte
	binary.BigEndian.PutUint64(hdr[:8], uint64(lease))
	binary.BigEndian.PutUint64(hdr[8:], uint64(len(key)))
	h.Write(hdr[:])
	h.Write([]byte(key))
	h.Write(body)
	return h.Sum(nil)
}

// seal returns the value a claim writes for rec on key under lease: rec
// in its canonical encoding (see canonical) with its MAC under the
// signing key in the "mac" field. The value is what open accepts.
func (ks macKeys) seal(key string, lease int64, rec Record) (string, error) {
	rec, body, err := canonical(rec)
	if err != nil {
		return "", err
	}
	rec.MAC = base64.RawURLEncoding.EncodeToString(sum(hmac.New(sha256.New, ks[0]), key, lease, body))
	val, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	return string(val), nil
}

// canonical returns rec as a follower will decode it, and the encoding
// that is signed: rec with an empty MAC, encoded, decoded and encoded
// again. encoding/json is deterministic, but not idempotent on every
// input (invalid UTF-8 becomes U+FFFD, raw schemas are compacted); one
// round trip reaches the form every later one keeps.
func canonical(rec Record) (Record, []byte, error) {
	rec.MAC = ""
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

// open decodes the value of key, attached to lease, and checks its MAC
// against every accepted key, in constant time each: what is checked is
// the re-encoding of the decoded record, so that only what was decoded,
// which is all a follower ever uses, is trusted, whatever the value's JSON
// looked like. Errors wrap errForged or errInvalidRecord.
//
// Cost: a JSON decode and encode of the record and one HMAC-SHA256 per
// accepted key tried (BenchmarkVerifyRecord); it runs on the follower
// only, once per record listed or watched, never on a call's path.
func (ks macKeys) open(key string, lease int64, val []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(val, &rec); err != nil {
		return Record{}, fmt.Errorf("%w: not a JSON record", errInvalidRecord)
	}
	if rec.MAC == "" {
		return Record{}, fmt.Errorf("%w: no MAC", errForged)
	}
	got, err := base64.RawURLEncoding.DecodeString(rec.MAC)
	if err != nil || len(got) != sha256.Size {
		return Record{}, fmt.Errorf("%w: a malformed MAC", errForged)
	}
	rec.MAC = ""
	body, err := json.Marshal(rec)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", errInvalidRecord, err)
	}
	for _, k := range ks {
		if hmac.Equal(got, sum(hmac.New(sha256.New, k), key, lease, body)) {
			return rec, nil
		}
	}
	return Record{}, fmt.Errorf("%w: the MAC does not match", errForged)
}
