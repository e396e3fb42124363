package mcpserve

import (
	"context"
	"crypto/ed25519"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingTransport records the requests it is asked to send and answers
// each with an empty event stream.
type recordingTransport struct{ sent []*http.Request }

func (t *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.sent = append(t.sent, r)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// A signed request goes to the peer's endpoint alone: a request for any
// other URL (another host, path, port or scheme) is not sent at all. The
// one sent carries a signature and the caller's assertion, and never a
// token: no Authorization, nothing under callerHeader, whatever the
// request had.
func TestFleetTransportSendsToItsEndpointAlone(t *testing.T) {
	ep, err := parseEndpoint("http://10.0.0.5:8931/fleet")
	require.NoError(t, err)
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	id, err := NewKeyring("r1", key, nil)
	require.NoError(t, err)
	base := &recordingTransport{}
	tr := &fleetTransport{base: base, sign: &hopSigner{id: id, markKey: deriveMarkKey("fleet-token-0123456789")},
		peer: "http://10.0.0.5:8931/fleet", endpoint: ep, begin: time.Second, limit: 1 << 20}
	ctx := context.WithValue(context.Background(), hopKey{}, &hop{assert: "an-assertion"})
	for _, u := range []string{
		"http://10.0.0.6:8931/fleet",
		"http://10.0.0.5:8932/fleet",
		"https://10.0.0.5:8931/fleet",
		"http://10.0.0.5:8931/steal",
		"http://10.0.0.5:8931/fleet?x=1",
		"http://evil.example/fleet",
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, errNotTheEndpoint, u)
	}
	require.Empty(t, base.sent, "requests for other URLs were sent")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "HTTP://10.0.0.5:8931/fleet", strings.NewReader("{}"))
	req.Header.Set(callerHeader, "forged")
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Len(t, base.sent, 1)
	h := base.sent[0].Header
	assert.Empty(t, h.Values("Authorization"))
	assert.Empty(t, h.Values(callerHeader))
	assert.Equal(t, "1", h.Get(hopHeader))
	assert.Equal(t, "r1", h.Get(hopReplicaHeader))
	assert.Equal(t, "an-assertion", h.Get(hopPrincipalHeader))
	assert.NotEmpty(t, h.Get(hopSignatureHeader))
	body, err := io.ReadAll(base.sent[0].Body)
	require.NoError(t, err)
	assert.Equal(t, "{}", string(body), "the body goes out as it was signed")
}

func TestEndpointKey(t *testing.T) {
	same := [][2]string{
		{"http://h/fleet", "HTTP://H/fleet"},
		{"http://h:80/fleet", "http://h/fleet"},
		{"https://h:443/fleet", "https://h/fleet"},
		{"http://h", "http://h/"},
		{"http://[::1]:80/f", "http://[::1]/f"},
	}
	for _, p := range same {
		a, _ := url.Parse(p[0])
		b, _ := url.Parse(p[1])
		if keyOf(a) != keyOf(b) {
			t.Errorf("%s and %s name different endpoints", p[0], p[1])
		}
	}
	differ := [][2]string{
		{"http://h/fleet", "https://h/fleet"},
		{"http://h:8080/fleet", "http://h/fleet"},
		{"https://h:80/fleet", "https://h/fleet"},
		{"http://h/fleet", "http://h/Fleet"},
		{"http://h/fleet", "http://h/fleet/"},
	}
	for _, p := range differ {
		a, _ := url.Parse(p[0])
		b, _ := url.Parse(p[1])
		if keyOf(a) == keyOf(b) {
			t.Errorf("%s and %s name the same endpoint", p[0], p[1])
		}
	}
}
