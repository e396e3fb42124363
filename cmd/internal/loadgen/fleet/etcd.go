package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/livereg/livereg/etcdfleet/embedded"
)

// startEtcd runs a single-node etcd in dir for one run: loopback on ports
// the kernel picks, 10 ms ticks and 100 ms elections (so that a 1 s lease
// TTL is not raised: the floor is 1.5 elections), no fsync. It returns the
// client endpoint and a function that stops the server.
func startEtcd(dir string) (string, func(), error) {
	e, err := embedded.Start(context.Background(), embedded.Config{
		Dir: dir, Name: "loadgen", TickMs: 10, ElectionMs: 100, NoFsync: true,
	})
	if err != nil {
		return "", nil, fmt.Errorf("embedded etcd: %w", err)
	}
	return e.Endpoint(), e.Close, nil
}

// proxy is a loopback TCP proxy between one replica's etcd client and one
// etcd endpoint. Cutting it closes every connection and refuses new ones,
// as a network partition or a dead process would: the replica's
// keepalives stop reaching etcd, and its lease expires on the server a TTL
// after the last one. Safe for concurrent use.
type proxy struct {
	ln     net.Listener
	target string // host:port

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newProxy listens on a loopback port for target, an http://host:port
// endpoint, and returns the proxy's own endpoint.
func newProxy(target string) (*proxy, string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("proxy for %q: not an http://host:port endpoint", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	p := &proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, "http://" + ln.Addr().String(), nil
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track registers c unless the proxy is cut or closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) serve(c net.Conn) {
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	// Closing both ends (deferred) ends the other copy.
	_ = c.Close()
	_ = up.Close()
	<-done
}

// Cut closes every connection and refuses new ones until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Restore accepts connections again after Cut.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close cuts the proxy for good and waits for its goroutines.
func (p *proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Cut()
	_ = p.ln.Close()
	p.wg.Wait()
}
