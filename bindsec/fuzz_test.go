package bindsec_test

import (
	"errors"
	"testing"

	"github.com/livereg/livereg/bindsec"
)

// FuzzStaticTokens: only the exact token authenticates, every other
// credential is refused with ErrUnauthenticated, and no input panics.
func FuzzStaticTokens(f *testing.F) {
	const token = "s3cret-token"
	auth := bindsec.NewStaticTokens(map[string]bindsec.Principal{token: bindsec.NewPrincipal("svc", "r")})
	for _, seed := range []string{"", token, token + " ", "Bearer " + token, "s3cret-toke", "\x00", "S3CRET-TOKEN"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, credential string) {
		pr, err := auth.Authenticate(ctx, credential)
		if credential == token {
			if err != nil || pr.Subject() != "svc" {
				t.Fatalf("the token was refused: %v", err)
			}
			return
		}
		if !errors.Is(err, bindsec.ErrUnauthenticated) {
			t.Fatalf("credential %q: got %v, want ErrUnauthenticated", credential, err)
		}
		if pr.Subject() != "" || pr.NumRoles() != 0 {
			t.Fatalf("a refused credential returned a principal: %+v", pr)
		}
	})
}
