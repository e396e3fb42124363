package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/livereg/livereg/mcpserve"
)

// A fleet over TLS. Two replicas serve their MCP and fleet endpoints over
// TLS, with certificates of a fleet CA that a client, and the hop
// (-fleet-ca), trust alone; each advertises https. A call on replica 1
// for replica 2's tool is forwarded over https. A replica that trusts
// another CA cannot forward to them. Replica 2's certificate is rotated,
// by replacing its files (seen within a second or so) and on SIGHUP; new
// handshakes see the new certificate and calls still cross the hop; a bad
// replacement keeps the certificate served.
func TestFleetTLS(t *testing.T) {
	dir := t.TempDir()
	ca, otherCA := newTestCA(t, "fleet CA"), newTestCA(t, "another CA")
	caFile, otherCAFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem")
	writeFile(t, caFile, ca.pem)
	writeFile(t, otherCAFile, otherCA.pem)
	files := func(name string) (cert, key string) {
		return filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem")
	}
	tlsArgs := func(name, caFile string) []string {
		cert, key := files(name)
		ca.issueNow(t).write(t, cert, key)
		return []string{"-tls-cert", cert, "-tls-key", key, "-fleet-ca", caFile}
	}
	r1 := startReplica(t, dir, "r1", append([]string{"-etcd-embedded", filepath.Join(dir, "etcd"), "-etcd-listen", "http://127.0.0.1:0"},
		tlsArgs("r1", caFile)...)...)
	r2 := startReplica(t, dir, "r2", append([]string{"-etcd", r1.etcd}, tlsArgs("r2", caFile)...)...)
	r3 := startReplica(t, dir, "r3", append([]string{"-etcd", r1.etcd}, tlsArgs("r3", otherCAFile)...)...)
	for _, r := range []*replicaProc{r1, r2, r3} {
		require.True(t, strings.HasPrefix(r.url, "https://127.0.0.1:"), "%s serves %s", r.name, r.url)
		assert.Equal(t, strings.TrimSuffix(r.url, "/mcp")+mcpserve.DefaultFleetPath, r.logField("advertise"), "%s's advertise URL", r.name)
	}
	ctx := ctxGuard(t)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	t.Cleanup(trusting.CloseIdleConnections)

	// The MCP endpoint, to a client that trusts the fleet CA alone.
	alice := connectTLS(t, r1.url, aliceToken, ca.pool)
	eventually(t, 5*time.Second, "replica 1 lists replica_r2", func() bool {
		return slices.Contains(toolNames(t, ctx, alice), "replica_r2")
	})
	callR2 := func(cs *mcp.ClientSession) (string, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "replica_r2"})
		if err != nil {
			return "", err
		}
		return firstText(t, res), nil
	}
	// The hop over https: replica 2 says it served the call, and where.
	text, err := callR2(alice)
	require.NoError(t, err)
	assert.Contains(t, text, "replica r2 served this call")
	assert.Contains(t, text, "fleet endpoint https://127.0.0.1:")

	// The fleet endpoint speaks TLS, with the fleet CA's certificate, and
	// nothing else: a client of the system's roots fails its handshake, a
	// plain request gets net/http's refusal.
	r2Host := hostOf(t, r2.url)
	fleetURL := "https://" + r2Host + mcpserve.DefaultFleetPath
	resp, err := trusting.Post(fleetURL, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an unauthenticated POST to the fleet endpoint")
	_, err = http.Post(fleetURL, "application/json", strings.NewReader("{}"))
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "a client of the system's roots")
	resp, err = http.Post("http://"+r2Host+mcpserve.DefaultFleetPath, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS listener")

	// Replica 3 trusts another CA: it cannot forward to replica 2.
	carol := connectTLS(t, r3.url, aliceToken, ca.pool)
	eventually(t, 5*time.Second, "replica 3 lists replica_r2", func() bool {
		return slices.Contains(toolNames(t, ctx, carol), "replica_r2")
	})
	_, err = callR2(carol)
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we, "replica 3 forwarded to a certificate its -fleet-ca does not sign")
	assert.Equal(t, mcpserve.CodePeerUnavailable, we.Code, "%v", we)

	// A rotation by replacing the files: new handshakes see the new
	// certificate once replica 2 looks at them again.
	cert2, key2 := files("r2")
	// Padded with newlines, which PEM ignores, to leave room for the
	// rewrite in place below.
	rotated := ca.issueNow(t)
	writeFile(t, cert2, append(rotated.certPEM, bytes.Repeat([]byte("\n"), 64)...))
	writeFile(t, key2, append(rotated.keyPEM, bytes.Repeat([]byte("\n"), 64)...))
	eventually(t, 5*time.Second, "replica 2 serves the rotated certificate", func() bool {
		return servedSerial(t, r2Host, ca.pool).Cmp(rotated.serial) == 0
	})
	_, err = callR2(alice)
	require.NoError(t, err, "a forward after the rotation")

	// A rotation on SIGHUP: the files rewritten in place, at their size and
	// with their modification times put back, so that only the signal
	// tells the replica to load them.
	hup := ca.issueNow(t)
	rewriteUnseen(t, cert2, hup.certPEM)
	rewriteUnseen(t, key2, hup.keyPEM)
	require.NoError(t, r2.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, 5*time.Second, "replica 2 serves the certificate loaded on SIGHUP", func() bool {
		return servedSerial(t, r2Host, ca.pool).Cmp(hup.serial) == 0
	})

	// A bad replacement, a certificate without its key, keeps the one
	// served, and says why.
	writeFile(t, cert2, ca.issueNow(t).certPEM)
	require.NoError(t, r2.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, 5*time.Second, "replica 2 logs the bad pair", func() bool {
		return slices.Contains(r2.logMessages(), "cannot load the TLS certificate; keeping the one loaded before")
	})
	assert.Equal(t, 0, servedSerial(t, r2Host, ca.pool).Cmp(hup.serial), "a bad pair replaced the one served")
	text, err = callR2(alice)
	require.NoError(t, err, "a forward after a bad replacement")
	assert.Contains(t, text, "replica r2 served this call")
	select {
	case <-r2.exited:
		t.Fatalf("replica 2 exited: %s", r2.logTail())
	default:
	}
}

// connectTLS is connect, over TLS to a server whose certificate a CA of
// pool signs.
func connectTLS(t *testing.T, endpoint, token string, pool *x509.CertPool) *mcp.ClientSession {
	t.Helper()
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(base.CloseIdleConnections)
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return base.RoundTrip(r)
	})}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	cs, err := cl.Connect(ctxGuard(t), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return p.Host
}

// rewriteUnseen writes data into name in place, padded to the file's size
// with newlines (which PEM ignores), and puts its modification time back:
// a change that a look at the file's identity, time and size misses.
func rewriteUnseen(t *testing.T, name string, data []byte) {
	t.Helper()
	fi, err := os.Stat(name)
	require.NoError(t, err)
	require.LessOrEqual(t, len(data), int(fi.Size()), "no room in %s for the new PEM", name)
	data = append(data, bytes.Repeat([]byte("\n"), int(fi.Size())-len(data))...)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(name, fi.ModTime(), fi.ModTime()))
}
