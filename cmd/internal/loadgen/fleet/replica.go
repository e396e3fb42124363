package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/internal/loadgen/bearer"
	"github.com/livereg/livereg/etcdfleet"
	"github.com/livereg/livereg/mcpserve"
)

// The run's credentials: valid holds the role that non-public plans need;
// the other client presents none.
const (
	credValid    = "valid"
	credNone     = "none"
	tokenValid   = "fl-valid-token"
	subjectValid = "fleetload"
	roleCall     = bearer.RoleCall
)

var creds = [...]string{credValid, credNone}

func authenticator() bindsec.Authenticator {
	return bindsec.NewStaticTokens(map[string]bindsec.Principal{tokenValid: bindsec.NewPrincipal(subjectValid, roleCall)})
}

func tokenOf(cred string) string {
	if cred == credValid {
		return tokenValid
	}
	return ""
}

var discard = slog.New(slog.DiscardHandler)

// replica is one replica instance: its etcd client behind proxies of its
// own, its etcdfleet.Replica, catalog and mcpserve server (Fleet set) on a
// loopback listener, and one SDK client session per credential. A crash
// replaces the instance in its slot with a fresh one.
type replica struct {
	id   int    // instance number, unique in the run, from 1
	name string // as its claims record it: r<slot>.<id>

	proxies  []*proxy
	rep      *etcdfleet.Replica
	cat      *catalog.Catalog
	srv      *mcpserve.Server
	endpoint string // the public MCP endpoint
	fleetURL string // the advertised fleet endpoint
	stop     context.CancelFunc
	served   chan struct{}
	ln       *killable
	tr       *http.Transport
	clients  [len(creds)]*mcp.ClientSession

	stopOnce sync.Once
	crashed  atomic.Bool // crashed: abandoned, its consumers not judged
	down     atomic.Bool // no longer given work (crashed, or closed)
}

// fleet is the run's replicas and its own etcd client, which bypasses the
// proxies: the checkers' reads and the revokes that make session losses.
type fleet struct {
	endpoints []string // etcd's
	prefix    string
	ttl       time.Duration
	opTimeout time.Duration
	token     string
	direct    *clientv3.Client
	// claimer and peers, if set, wrap each replica's Claimer and its
	// server's Fleet.Peers: tests plant faults with them.
	claimer func(*etcdfleet.Replica) catalog.Claimer
	peers   func(*etcdfleet.Replica) mcpserve.Peers
	// prog hears every client's progress notifications (progress.go).
	prog *progressBook

	nextID atomic.Int64
	slots  []atomicReplica
	mu     sync.Mutex
	all    []*replica // every instance, for the end of the run
}

// toolDir is where the fleet's tool claims live.
func (f *fleet) toolDir() string { return f.prefix + "/tools/" }

// newReplica brings a replica instance up in slot.
func (f *fleet) newReplica(ctx context.Context, slot int) (*replica, error) {
	r := &replica{id: int(f.nextID.Add(1))}
	r.name = fmt.Sprintf("r%d.%d", slot, r.id)
	fail := func(err error) (*replica, error) {
		r.close(context.Background())
		return nil, fmt.Errorf("replica %s: %w", r.name, err)
	}
	var eps []string
	for _, ep := range f.endpoints {
		p, pep, err := newProxy(ep)
		if err != nil {
			return fail(err)
		}
		r.proxies = append(r.proxies, p)
		eps = append(eps, pep)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	ln := &killable{Listener: tl, conns: map[net.Conn]struct{}{}}
	r.ln = ln
	base := "http://" + ln.Addr().String()
	r.fleetURL = base + mcpserve.DefaultFleetPath
	r.rep, err = etcdfleet.Join(ctx, etcdfleet.Config{Endpoints: eps, Prefix: f.prefix, TTL: f.ttl, OpTimeout: f.opTimeout,
		Replica: r.name, Advertise: r.fleetURL, Logger: zap.NewNop(), Token: f.token})
	if err != nil {
		ln.Close()
		return fail(err)
	}
	var claimer catalog.Claimer = r.rep
	if f.claimer != nil {
		claimer = f.claimer(r.rep)
	}
	r.cat, err = catalog.New(catalog.Config{Authenticator: authenticator(), Logger: discard, Claimer: claimer, Remote: r.rep.Remote()})
	if err != nil {
		ln.Close()
		return fail(err)
	}
	var peers mcpserve.Peers = r.rep
	if f.peers != nil {
		peers = f.peers(r.rep)
	}
	// The replica signs its hop requests as itself, whatever wraps its
	// Peers.
	id, _ := any(r.rep).(mcpserve.Identity)
	r.srv, err = mcpserve.New(r.cat, mcpserve.Options{Name: "loadgen-" + r.name, Logger: discard, Path: "/mcp",
		Fleet: &mcpserve.Fleet{Peers: peers, Identity: id, Token: f.token}})
	if err != nil {
		ln.Close()
		return fail(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	r.stop, r.served = stop, make(chan struct{})
	go func() { defer close(r.served); _ = r.srv.Serve(sctx, ln) }()
	r.endpoint = base + "/mcp"
	r.tr = &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	for i, cred := range creds {
		client := mcp.NewClient(&mcp.Implementation{Name: "livereg-loadgen-fleet", Version: "dev"},
			&mcp.ClientOptions{Logger: discard, ProgressNotificationHandler: f.prog.hear})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:             r.endpoint,
			HTTPClient:           &http.Client{Transport: bearer.Transport{Next: r.tr, Token: tokenOf(cred)}},
			DisableStandaloneSSE: true,
		}, nil)
		if err != nil {
			return fail(fmt.Errorf("mcp connect: %w", err))
		}
		r.clients[i] = cs
	}
	f.mu.Lock()
	f.all = append(f.all, r)
	f.mu.Unlock()
	return r, nil
}

// stopServing ends the clients, the server and its listener, once: with
// abrupt set, as a process's death would, every connection at once;
// otherwise gracefully, for up to graceWait. The clients stay in place,
// closed: a worker that picked r before it went down gets an error from
// them.
func (r *replica) stopServing(abrupt bool) {
	r.stopOnce.Do(func() {
		if abrupt && r.ln != nil {
			r.ln.kill()
		}
		for _, cs := range r.clients {
			if cs != nil {
				_ = cs.Close()
			}
		}
		if r.stop != nil {
			r.stop()
			// A graceful shutdown waits, net/http's way, up to 5 s for
			// connections a client opened but sent nothing on; at the
			// end of a run nothing is left to finish.
			t := time.NewTimer(graceWait)
			select {
			case <-r.served:
			case <-t.C:
				r.ln.kill()
				<-r.served
			}
			t.Stop()
		}
		if r.srv != nil {
			_ = r.srv.Close()
		}
		if r.tr != nil {
			r.tr.CloseIdleConnections()
		}
	})
}

// crash makes r die as a process would: its etcd connections are cut (its
// keepalives stop, so its lease expires a TTL later and its claims with
// it), its server stops answering, and it is abandoned, never Closed.
func (r *replica) crash() {
	r.crashed.Store(true)
	r.down.Store(true)
	for _, p := range r.proxies {
		p.Cut()
	}
	r.stopServing(true)
}

// cut cuts r's etcd connections until restore.
func (r *replica) cut() {
	for _, p := range r.proxies {
		p.Cut()
	}
}

func (r *replica) restore() {
	for _, p := range r.proxies {
		p.Restore()
	}
}

// close shuts r down at the end of the run: a live replica leaves the
// fleet (Close revokes its lease); a crashed one's revoke cannot reach
// etcd and is bounded by ctx.
func (r *replica) close(ctx context.Context) {
	r.down.Store(true)
	r.stopServing(false)
	if r.rep != nil {
		_ = r.rep.Close(ctx)
	}
	for _, p := range r.proxies {
		p.Close()
	}
}

// pick returns a random replica instance that is up, nil if none is.
func (f *fleet) pick(rng *rand.Rand) *replica {
	n := len(f.slots)
	start := rng.IntN(n)
	for i := range n {
		if r := f.slots[(start+i)%n].Load(); r != nil && !r.down.Load() {
			return r
		}
	}
	return nil
}

// pickOther picks an up replica other than not, or not itself when it is
// the only one up; nil when none is.
func (f *fleet) pickOther(rng *rand.Rand, not *replica) *replica {
	n := len(f.slots)
	start := rng.IntN(n)
	var fallback *replica
	for i := range n {
		r := f.slots[(start+i)%n].Load()
		switch {
		case r == nil || r.down.Load():
		case r == not:
			fallback = r
		default:
			return r
		}
	}
	return fallback
}

// byEndpoint returns the instance that advertised the fleet endpoint ep.
func (f *fleet) byEndpoint(ep string) *replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.all {
		if r.fleetURL == ep {
			return r
		}
	}
	return nil
}

// up returns every replica instance that is up.
func (f *fleet) up() []*replica {
	var out []*replica
	for i := range f.slots {
		if r := f.slots[i].Load(); r != nil && !r.down.Load() {
			out = append(out, r)
		}
	}
	return out
}

// leaseAlive asks etcd, directly, whether lease still exists. A lease
// never comes back, so alive now means alive at every moment since its
// grant (etcd answers -1 for a lease it no longer has; 0 is a lease about
// to expire, whose keys are still there). An error counts as not alive:
// the case is then inconclusive.
func (f *fleet) leaseAlive(lease int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := f.direct.TimeToLive(ctx, clientv3.LeaseID(lease))
	return err == nil && resp.TTL >= 0
}

// waitSession waits up to patience for r to have lost more than lost
// sessions and to hold a new one.
func waitSession(r *replica, lost int, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if r.rep.SessionsLost() > lost && r.rep.Lease() != clientv3.NoLease {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("replica %s: %w: after %v it has lost %d sessions (was %d), lease %x",
		r.name, errNoNewSession, patience, r.rep.SessionsLost(), lost, r.rep.Lease())
}

var errNoNewSession = errors.New("no new session")

// atomicReplica is a slot: the instance that serves in it now.
type atomicReplica = atomic.Pointer[replica]

// graceWait bounds a graceful stop of a replica's server.
const graceWait = 500 * time.Millisecond

// killable is a listener whose accepted connections can all be closed at
// once, as a crash closes them.
type killable struct {
	net.Listener
	mu     sync.Mutex
	killed bool
	conns  map[net.Conn]struct{}
}

func (l *killable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = struct{}{}
	return &killableConn{Conn: c, l: l}, nil
}

// kill closes the listener and every connection it accepted.
func (l *killable) kill() {
	l.mu.Lock()
	l.killed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	_ = l.Listener.Close()
	for c := range conns {
		_ = c.Close()
	}
}

type killableConn struct {
	net.Conn
	l    *killable
	once sync.Once
}

func (c *killableConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c.Conn)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
