package mcpserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// recordingTransport records the requests it is asked to send and answers
// each with an empty event stream.
type recordingTransport struct{ sent []*http.Request }

func (t *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.sent = append(t.sent, r)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// The fleet's credential and the caller's go on requests for the peer's
// endpoint alone: a request for any other URL (another host, path, port or
// scheme) is not sent at all.
func TestFleetTransportSendsToItsEndpointAlone(t *testing.T) {
	ep, err := parseEndpoint("http://10.0.0.5:8931/fleet")
	if err != nil {
		t.Fatal(err)
	}
	base := &recordingTransport{}
	tr := &fleetTransport{base: base, token: "fleet-token", endpoint: ep, begin: time.Second, limit: 1 << 20}
	ctx := context.WithValue(context.Background(), hopKey{}, &hop{cred: "alice-token"})
	for _, u := range []string{
		"http://10.0.0.6:8931/fleet",
		"http://10.0.0.5:8932/fleet",
		"https://10.0.0.5:8931/fleet",
		"http://10.0.0.5:8931/steal",
		"http://10.0.0.5:8931/fleet?x=1",
		"http://evil.example/fleet",
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
		if _, err := tr.RoundTrip(req); !errors.Is(err, errNotTheEndpoint) {
			t.Errorf("%s: %v; want errNotTheEndpoint", u, err)
		}
	}
	if len(base.sent) != 0 {
		t.Fatalf("%d requests for other URLs were sent", len(base.sent))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "HTTP://10.0.0.5:8931/fleet", strings.NewReader("{}"))
	req.Header.Set(callerHeader, "forged")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if len(base.sent) != 1 {
		t.Fatalf("%d requests sent for the endpoint; want 1", len(base.sent))
	}
	h := base.sent[0].Header
	if h.Get("Authorization") != "Bearer fleet-token" || h.Get(callerHeader) != "alice-token" || h.Get(hopHeader) != "1" {
		t.Fatalf("the request to the endpoint carries %v", h)
	}
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
