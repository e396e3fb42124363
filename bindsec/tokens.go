package bindsec

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"slices"
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
// empty credential is never valid. The map and the principals' role slices
// are copied.
func NewStaticTokens(tokens map[string]Principal) *StaticTokens {
	s := &StaticTokens{entries: make([]staticEntry, 0, len(tokens))}
	for tok, pr := range tokens {
		if tok == "" {
			continue
		}
		pr.Roles = slices.Clone(pr.Roles)
		s.entries = append(s.entries, staticEntry{digest: sha256.Sum256([]byte(tok)), principal: pr})
	}
	return s
}

// Authenticate returns the principal for credential, or ErrUnauthenticated.
// The returned principal's Roles slice is shared and read-only.
func (s *StaticTokens) Authenticate(_ context.Context, credential string) (Principal, error) {
	if credential == "" {
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

// Len returns the number of tokens in the table.
func (s *StaticTokens) Len() int { return len(s.entries) }
