package mcpserve

import (
	"bytes"
	"crypto/ed25519"
	"net/http"
	"testing"
	"time"
)

// BenchmarkHopSignVerify is what the hop's authentication costs a
// forward, on both sides, without the network: the forwarder's signature
// (nonce, body hash, Identity.Sign) and the holder's check and
// verification (Identity.Verify, the nonce recorded).
func BenchmarkHopSignVerify(b *testing.B) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	id, err := NewKeyring("r1", key, nil)
	if err != nil {
		b.Fatal(err)
	}
	const endpoint = "http://10.0.0.5:8931/fleet"
	ep, _ := parseEndpoint(endpoint)
	g := &hopSigner{id: id, markKey: deriveMarkKey("fleet-token-0123456789")}
	v := &hopVerifier{id: id, self: ep, isSelf: true, window: defaultReplayWindow, now: time.Now,
		nonces: newNonceCache(defaultMaxHopNonces, defaultReplayWindow)}
	body := bytes.Repeat([]byte("x"), 300)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, endpoint, nil)
		req.Header[hopHeader] = []string{"1"}
		now := time.Now()
		if err := g.sign(req, body, endpoint, anonymous(now), now); err != nil {
			b.Fatal(err)
		}
		c, err := v.check(req.Header)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.verify(&c, req, body); err != nil {
			b.Fatal(err)
		}
	}
}
