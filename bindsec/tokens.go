package bindsec

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
)

// StaticTokens authenticates bearer tokens from a fixed table. It keeps only
// the SHA-256 digest of each token, compares digests in constant time, and
// never logs or returns a token. It is safe for concurrent use.
//
// Every lookup compares against every digest, so that the time it takes
// does not reveal which token matched or how close a guess came; the table
// is meant for a handful of tokens, not thousands.
type StaticTokens struct {
	entries []staticEntry
}

type staticEntry struct {
	digest    [sha256.Size]byte
	principal Principal
}

// NewStaticTokens builds an authenticator from a map of plaintext bearer
// tokens to the principals they stand for. Empty tokens are ignored: the
// empty credential is never valid. The map is copied; the principals need
// no copy, as their roles cannot change.
func NewStaticTokens(tokens map[string]Principal) *StaticTokens {
	s := &StaticTokens{entries: make([]staticEntry, 0, len(tokens))}
	for tok, pr := range tokens {
		if tok == "" {
			continue
		}
		s.entries = append(s.entries, staticEntry{digest: sha256.Sum256([]byte(tok)), principal: pr})
	}
	return s
}

// Authenticate returns the principal for credential, or ErrUnauthenticated.
// The principal shares its roles with the table without exposing them (see
// Principal), so a caller cannot change what a token grants, and the call
// does not allocate. A nil table knows no token.
func (s *StaticTokens) Authenticate(_ context.Context, credential string) (Principal, error) {
	if s == nil || credential == "" {
		return Principal{}, ErrUnauthenticated
	}
	d := sha256.Sum256([]byte(credential))
	match := -1
	for i := range s.entries {
		if subtle.ConstantTimeCompare(d[:], s.entries[i].digest[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, ErrUnauthenticated
	}
	return s.entries[match].principal, nil
}

// Len returns the number of tokens in the table; 0 for a nil table.
func (s *StaticTokens) Len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}
