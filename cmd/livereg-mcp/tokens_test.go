package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/livereg/livereg/bindsec"
)

const (
	aliceToken = "0bc3f1e7a9d24c58b6e2"
	bobToken   = "dG9rZW4tZm9yLWJvYg==" // base64 with padding
)

func authenticate(t *testing.T, st *bindsec.StaticTokens, token string) (bindsec.Principal, error) {
	t.Helper()
	if st == nil {
		t.Fatal("no table")
	}
	return st.Authenticate(context.Background(), token)
}

func TestParseTokens(t *testing.T) {
	st, err := parseTokens(" " + aliceToken + "@alice:admin+ops , " + bobToken + "@bob@example.com\n# a comment\n\n")
	if err != nil || st.Len() != 2 {
		t.Fatalf("parseTokens = %v, %v", st, err)
	}
	pr, err := authenticate(t, st, aliceToken)
	if err != nil || pr.Subject() != "alice" || !slices.Equal(slices.Collect(pr.Roles()), []string{"admin", "ops"}) {
		t.Errorf("alice = %+v, %v", pr, err)
	}
	// The padding is part of the token, and a subject may hold '@'.
	pr, err = authenticate(t, st, bobToken)
	if err != nil || pr.Subject() != "bob@example.com" || pr.NumRoles() != 0 {
		t.Errorf("bob = %+v, %v", pr, err)
	}
	if _, err := authenticate(t, st, strings.TrimRight(bobToken, "=")); err == nil {
		t.Error("the token without its padding authenticated")
	}
	if st, err := parseTokens(" \n# only a comment\n"); st != nil || err != nil {
		t.Errorf("empty spec = %v, %v", st, err)
	}
}

// The review's cases, and every other entry that does not parse, are
// refused, and no error quotes any part of the spec.
func TestParseTokensRefusesAmbiguousAndShort(t *testing.T) {
	for _, bad := range []string{
		"dG9rZW4tdG9rZW4tdG9rZW4==alice:admin",            // the old TOKEN=SUBJECT form, padded token
		"abcdefghijklmnop=cdefghijklmnopqr=mallory:admin", // the old form, '=' inside
		"s3cretsecretsecret=alice:admin",                  // the old form, plain
		"ab=cdefghijklmnopqr@mallory:admin",               // '=' inside a token
		"shortsecret@alice:admin",                         // under 16 bytes
		"@alice",                                          // no token
		"secretsecretsecret@",                             // no subject
		"secretsecretsecret@:admin",                       // no subject
		"secretsecretsecret@alice:",                       // an empty role
		"secretsecretsecret@alice:admin++ops",             // an empty role
		"secret secretsecret@alice",                       // a space in the token
		"secretsecretsecret@al ice",                       // a space in the subject
		"secretsecretsecret@alice:ad:min",                 // ':' in a role
		"secretsecretsecret@alice,secretsecretsecret@bob", // a repeated token
	} {
		st, err := parseTokens(bad)
		if err == nil || st != nil {
			t.Errorf("parseTokens(%q) accepted", bad)
			continue
		}
		if !errors.Is(err, errTokenSpec) {
			t.Errorf("parseTokens(%q) = %v, want errTokenSpec", bad, err)
		}
		for _, part := range strings.FieldsFunc(bad, func(r rune) bool { return strings.ContainsRune("@:=+, ", r) }) {
			if len(part) >= 4 && strings.Contains(err.Error(), part) {
				t.Errorf("parseTokens(%q) error quotes %q: %v", bad, part, err)
			}
		}
	}
}

// A stray argument after -tokens, and every flag error, is reported
// without quoting what was given.
func TestArgErrorsQuoteNothing(t *testing.T) {
	const secret = "s3cretsecretsecret"
	for _, args := range [][]string{
		{"-tokens", secret + "@alice:admin,", "other" + secret + "@bob"},
		{"-" + secret},
		{"-log-level", secret},
		{"-shutdown-timeout", secret},
		{"--" + secret + "=x"},
	} {
		var stderr bytes.Buffer
		_, err := parseArgs(args, func(string) string { return "" }, &stderr)
		if err == nil {
			t.Errorf("parseArgs(%q) accepted", args)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(stderr.String(), secret) {
			t.Errorf("parseArgs(%q) quotes the secret: %v; stderr: %s", args, err, stderr.String())
		}
	}
}

// -h says that -tokens shows in ps and names the safer ways.
func TestHelpWarnsAboutPS(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseArgs([]string{"-h"}, func(string) string { return "" }, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h = %v", err)
	}
	for _, want := range []string{"ps", "-tokens-file", tokensEnv, "0600"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q:\n%s", want, stderr.String())
		}
	}
}

func TestTokensFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not narrowed by the umask
			t.Fatal(err)
		}
		return p
	}
	env := func(string) string { return "envtokenenvtokenenv@eve" }
	good := write("good", "# tokens\n"+aliceToken+"@alice:admin\n"+bobToken+"@bob\n", 0o600)
	cfg, err := parseArgs([]string{"-tokens-file", good}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseTokens(cfg.tokens)
	if err != nil || st.Len() != 2 {
		t.Fatalf("tokens from the file = %v, %v", st, err)
	}

	for name, mode := range map[string]os.FileMode{"group-readable": 0o640, "world-readable": 0o604, "group-writable": 0o620} {
		p := write(name, aliceToken+"@alice\n", mode)
		_, err := parseArgs([]string{"-tokens-file", p}, env, io.Discard)
		if !errors.Is(err, errTokenSpec) || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: err = %v, want a refusal", mode, err)
		}
	}
	missing := filepath.Join(dir, "s3cretsecretsecret")
	if _, err := parseArgs([]string{"-tokens-file", missing}, env, io.Discard); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("missing file: err = %v, want a refusal that does not quote the path", err)
	}
	if _, err := parseArgs([]string{"-tokens-file", dir}, env, io.Discard); err == nil {
		t.Error("a directory was accepted as the tokens file")
	}
	if _, err := parseArgs([]string{"-tokens-file", good, "-tokens", aliceToken + "@alice"}, env, io.Discard); err == nil {
		t.Error("-tokens and -tokens-file together were accepted")
	}
}
