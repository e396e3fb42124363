package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The certificate is loaded again when its files change, looked at no
// more than once a second: within the second the old one is served, after
// it the new one. A bad replacement keeps the one loaded, and is logged
// once, not at every look. reload (SIGHUP) loads at once.
func TestCertReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ca := newTestCA(t, "fleet CA")
		first, second, third := ca.issueNow(t), ca.issueNow(t), ca.issueNow(t)
		cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		first.write(t, cert, key)
		var cfg config
		cfg.certFile, cfg.keyFile = cert, key
		require.NoError(t, checkTLS(&cfg, nil))
		var logs bytes.Buffer
		certs := cfg.certs
		certs.setLogger(slog.New(slog.NewTextHandler(&logs, nil)))
		serial := func() string { return certs.get().Leaf.SerialNumber.String() }
		require.Equal(t, first.serial.String(), serial())

		// A rotation: seen once the second is over, not before.
		second.write(t, cert, key)
		time.Sleep(reloadInterval - time.Millisecond) // synctest's clock: no real wait
		assert.Equal(t, first.serial.String(), serial(), "the files were looked at again within the second")
		time.Sleep(time.Millisecond)
		assert.Equal(t, second.serial.String(), serial(), "a rotation was not picked up")
		assert.Contains(t, logs.String(), "loaded the TLS certificate again")

		// A bad replacement: a new certificate with the old key.
		writeFile(t, cert, third.certPEM)
		for range 3 {
			time.Sleep(reloadInterval)
			assert.Equal(t, second.serial.String(), serial(), "a bad pair replaced a good one")
		}
		assert.Equal(t, 1, strings.Count(logs.String(), "cannot load the TLS certificate; keeping the one loaded before"), logs.String())
		assert.Contains(t, logs.String(), "private key does not match")

		// The key comes: the next look loads the pair.
		writeFile(t, key, third.keyPEM)
		time.Sleep(reloadInterval)
		assert.Equal(t, third.serial.String(), serial())

		// reload loads at once, within the second, the files changed or not.
		first.write(t, cert, key)
		certs.reload()
		assert.Equal(t, first.serial.String(), serial(), "reload did not load the new pair")
	})
}

// Handshakes get the certificate concurrently with rotations, looks at
// the files and reloads: each gets a pair that loaded, never nil. Run
// with -race, it checks that get shares nothing unguarded.
func TestCertReloadConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ca := newTestCA(t, "fleet CA")
		pairs := []testPair{ca.issueNow(t), ca.issueNow(t), ca.issueNow(t)}
		valid := map[string]bool{}
		for _, p := range pairs {
			valid[p.serial.String()] = true
		}
		cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		pairs[0].write(t, cert, key)
		var cfg config
		cfg.certFile, cfg.keyFile = cert, key
		require.NoError(t, checkTLS(&cfg, nil))
		certs := cfg.certs
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 40 {
					c := certs.get()
					if !assert.NotNil(t, c) || !assert.True(t, valid[c.Leaf.SerialNumber.String()]) {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		for i := 1; i <= 6; i++ {
			time.Sleep(reloadInterval / 2)
			pairs[i%len(pairs)].write(t, cert, key)
			if i%3 == 0 {
				certs.reload()
			}
		}
		wg.Wait()
	})
}
