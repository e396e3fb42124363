package fleet

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every request the impostor's listener receives is a violation, and the
// ones holding the fleet token or a caller's token, in any header value
// or the body, are counted as such.
func TestImpostorListenerJudgesEveryRequest(t *testing.T) {
	const fleetTok = "fleet-token-for-the-test"
	for _, tc := range []struct {
		name          string
		header        http.Header
		body          string
		fleet, caller int64
	}{
		{"a signed hop, no token", http.Header{"Livereg-Fleet-Replica": {"r0.1"}}, `{"method":"tools/call"}`, 0, 0},
		{"the caller's token as bearer", http.Header{"Authorization": {"Bearer " + tokenValid}}, "{}", 0, 1},
		{"the caller's token in another header", http.Header{"Livereg-Fleet-Caller": {tokenValid}}, "{}", 0, 1},
		{"the fleet token as bearer", http.Header{"Authorization": {"Bearer " + fleetTok}}, "{}", 1, 0},
		{"the fleet token in the body", http.Header{}, `{"t":"` + fleetTok + `"}`, 1, 0},
		{"both", http.Header{"X-A": {"x", fleetTok}}, `{"c":"` + tokenValid + `"}`, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			im := &impostor{t: tl, secret: [2]string{fleetTok, tokenValid}}
			r := httptest.NewRequest(http.MethodPost, "/fleet", strings.NewReader(tc.body))
			r.Header = tc.header
			im.serve(httptest.NewRecorder(), r)
			assert.Equal(t, int64(1), im.hits.Load())
			assert.Equal(t, tc.fleet, im.leaked[0].Load(), "requests with the fleet token")
			assert.Equal(t, tc.caller, im.leaked[1].Load(), "requests with a caller's token")
			assert.Equal(t, 1+tc.fleet+tc.caller, tl.Violations(InvImpostor), "violations: %v", tl.Examples(InvImpostor))
		})
	}
}
