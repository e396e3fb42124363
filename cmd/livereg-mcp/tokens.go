package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/livereg/livereg/bindsec"
)

// minTokenLen is the shortest bearer token accepted: 16 bytes, so that a
// token cannot be guessed in any number of online tries that matters.
const minTokenLen = 16

// maxTokensFile bounds what -tokens-file reads.
const maxTokensFile = 1 << 20

// tokenSpecHelp describes the spec format, for -h and errors.
const tokenSpecHelp = "TOKEN@SUBJECT[:ROLE[+ROLE...]], entries separated by commas or newlines"

// errTokenSpec is wrapped by every error about a token spec. No such error
// quotes any part of the spec: a misplaced separator can turn a token into
// what looks like a subject or a role, so entries are named by number only.
var errTokenSpec = errors.New("tokens")

// parseTokens reads a token spec; nil means no tokens.
//
// The format is unambiguous: a TOKEN is an RFC 6750 bearer token
// (letters, digits and -._~+/ with trailing = padding only), so it never
// contains '@', and the first '@' of an entry ends it; SUBJECT runs to the
// first ':' and may itself contain '@'; ROLEs are separated by '+'. Blank
// entries and lines starting with '#' are ignored. A token shorter than 16
// bytes, a repeated token, an empty subject or role, and anything else that
// does not parse are refused.
func parseTokens(spec string) (*bindsec.StaticTokens, error) {
	table := map[string]bindsec.Principal{}
	first := map[string]int{} // token -> entry number, to name repeats
	n := 0
	for line := range strings.Lines(spec) {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for entry := range strings.SplitSeq(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			n++
			token, pr, err := parseEntry(entry)
			if err != nil {
				return nil, fmt.Errorf("%w: entry %d: %w (the format is %s)", errTokenSpec, n, err, tokenSpecHelp)
			}
			if prev, dup := first[token]; dup {
				return nil, fmt.Errorf("%w: entries %d and %d have the same token", errTokenSpec, prev, n)
			}
			first[token] = n
			table[token] = pr
		}
	}
	if len(table) == 0 {
		return nil, nil
	}
	return bindsec.NewStaticTokens(table), nil
}

// parseEntry parses TOKEN@SUBJECT[:ROLE[+ROLE...]]. Its errors say what is
// wrong, never what was there.
func parseEntry(entry string) (string, bindsec.Principal, error) {
	token, who, ok := strings.Cut(entry, "@")
	if !ok {
		return "", bindsec.Principal{}, errors.New("no '@' between the token and the subject")
	}
	switch {
	case !isBearerToken(token):
		return "", bindsec.Principal{}, errors.New("the token is not a bearer token (letters, digits, -._~+/ and trailing '=' only)")
	case len(token) < minTokenLen:
		return "", bindsec.Principal{}, fmt.Errorf("the token is shorter than %d bytes", minTokenLen)
	}
	subject, roleList, hasRoles := strings.Cut(who, ":")
	if subject == "" || strings.ContainsFunc(subject, isSpaceOrControl) {
		return "", bindsec.Principal{}, errors.New("the subject is empty or contains spaces")
	}
	var roles []string
	if hasRoles {
		for r := range strings.SplitSeq(roleList, "+") {
			if r == "" || strings.ContainsFunc(r, isSpaceOrControl) || strings.Contains(r, ":") {
				return "", bindsec.Principal{}, errors.New("a role is empty or contains spaces or ':'")
			}
			roles = append(roles, r)
		}
	}
	return token, bindsec.NewPrincipal(subject, roles...), nil
}

// isBearerToken reports whether s matches RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isBearerToken(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range []byte(body) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// readTokensFile reads a token spec from a file that only its owner may
// read or write: a tokens file that others can read has leaked its tokens
// already, so it is refused rather than warned about. Its errors do not
// quote the path, which a misplaced argument could have filled with a
// token.
func readTokensFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("%w: -tokens-file: %w", errTokenSpec, pathless(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: -tokens-file: %w", errTokenSpec, pathless(err))
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: -tokens-file is not a regular file", errTokenSpec)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%w: -tokens-file has mode %04o: group or others may access it; chmod 600 it", errTokenSpec, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return "", fmt.Errorf("%w: -tokens-file: %w", errTokenSpec, pathless(err))
	}
	if len(b) > maxTokensFile {
		return "", fmt.Errorf("%w: -tokens-file is larger than %d bytes", errTokenSpec, maxTokensFile)
	}
	return string(b), nil
}

// pathless drops the path from a file error.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
