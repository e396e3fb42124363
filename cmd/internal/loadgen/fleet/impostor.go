package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// The impostor is a replica with valid etcd access (the run's own
// endpoints and prefix, as the forger has) that the fleet authority never
// enrolled: it joins with a fleet token of its own, so that its
// enrollment is signed by an authority that is not the fleet's, and its
// membership and claims, for names of its own, by its own Ed25519 key,
// all in etcdfleet's genuine format. Its records advertise its listener,
// which records what it receives. Invariant 13: no replica lists or
// locates its names, no call reaches its listener, and nothing it
// receives holds the fleet token or a caller's.

// impostorPrefix begins every name the impostor claims.
const impostorPrefix = "impostor-"

// impostorNames is how many names it claims.
const impostorNames = 3

type impostor struct {
	rep    *etcdfleet.Replica
	cat    *catalog.Catalog
	keep   []*catalog.Consumer
	ln     net.Listener
	srv    *http.Server
	served chan struct{}
	url    string
	secret [2]string // the fleet token and the callers' token, which its listener must never receive
	t      *tally

	hits   atomic.Int64
	leaked [2]atomic.Int64 // requests holding each secret
}

// secretNames names im.secret's entries.
var secretNames = [2]string{"the fleet token", "a caller's token"}

// newImpostor joins the fleet f's etcd as "impostor", under a token no
// replica holds, claims its names and serves its listener.
func newImpostor(ctx context.Context, f *fleet, t *tally) (*impostor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var own [32]byte
	_, _ = rand.Read(own[:])
	im := &impostor{ln: ln, url: "http://" + ln.Addr().String() + mcpserve.DefaultFleetPath, t: t, served: make(chan struct{}),
		secret: [2]string{f.token, tokenValid}}
	im.srv = &http.Server{Handler: http.HandlerFunc(im.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { defer close(im.served); _ = im.srv.Serve(ln) }()
	im.rep, err = etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: f.endpoints, Prefix: f.prefix, TTL: f.ttl, OpTimeout: f.opTimeout,
		Replica: "impostor", Advertise: im.url, Logger: zap.NewNop(), Token: "impostor-" + hex.EncodeToString(own[:])})
	if err != nil {
		im.close()
		return nil, fmt.Errorf("impostor: join: %w", err)
	}
	if im.cat, err = catalog.New(catalog.Config{Claimer: im.rep, Remote: im.rep.Remote()}); err != nil {
		im.close()
		return nil, err
	}
	for i := 1; i <= impostorNames; i++ {
		k, err := im.cat.StartTool(ctx, catalog.Tool{Name: fmt.Sprintf("%s%d", impostorPrefix, i), Title: "impostor", InputSchema: inputSchema},
			bindsec.Plan{Public: true}, func(context.Context, catalog.Call) (catalog.Result, error) {
				return catalog.TextResult("impostor"), nil
			})
		if err != nil {
			im.close()
			return nil, fmt.Errorf("impostor: claim its names: %w", err)
		}
		im.keep = append(im.keep, k)
	}
	return im, nil
}

// serve judges every request the listener receives: each is a record of
// the impostor's followed, and one holding a secret a secret leaked.
func (im *impostor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	im.hits.Add(1)
	im.t.Violate(InvImpostor, "the impostor's listener received %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Mcp-Method"))
	for i, s := range im.secret {
		if s == "" {
			continue
		}
		var where []string
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					where = append(where, "header "+name)
				}
			}
		}
		if bytes.Contains(body, []byte(s)) {
			where = append(where, "the body")
		}
		if len(where) > 0 {
			im.leaked[i].Add(1)
			im.t.Violate(InvImpostor, "the impostor's listener received %s in %s", secretNames[i], strings.Join(where, ", "))
		}
	}
	http.Error(w, "impostor", http.StatusServiceUnavailable)
}

// watch checks invariant 13 every 100 ms until ctx ends: every replica
// that is up neither lists nor locates the impostor's names, and a call
// for one through it is not forwarded (the listener judges that).
func (w *world) watchImpostor(ctx context.Context, im *impostor) {
	for n := 0; sleepCtx(ctx, 100*time.Millisecond); n++ {
		name := fmt.Sprintf("%s%d", impostorPrefix, n%impostorNames+1)
		for _, r := range w.f.up() {
			w.t.Check(InvImpostor, 1)
			for _, t := range r.cat.Tools().List() {
				if strings.HasPrefix(t.Name, impostorPrefix) {
					w.t.Violate(InvImpostor, "%s lists the impostor's %q", r.name, t.Name)
				}
			}
			if ep, ok := r.rep.Peer(catalog.KindTool, name); ok {
				w.t.Violate(InvImpostor, "%s locates the impostor's %q at %s", r.name, name, ep)
			}
			if cs := r.clients[0]; cs != nil {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, _ = cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: callArgs{Cred: credValid, Via: r.id}})
				cancel()
			}
		}
	}
}

// close leaves etcd (its records go with its lease) and stops listening.
func (im *impostor) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if im.rep != nil {
		_ = im.rep.Close(ctx)
	}
	_ = im.srv.Close()
	<-im.served
}
