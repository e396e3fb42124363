package mcpserve

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
)

// Defaults of the shares of a cap.
const (
	// defaultClientShare is the fraction of each cap one client may hold:
	// a quarter, so that it takes four clients at their share to fill a
	// cap, while a lone client still gets 250 of the 1,000 default
	// sessions, far more than any real client opens.
	defaultClientShare = 0.25
	// defaultAnonymousShare is the fraction of each cap that the clients
	// without a credential hold together, when an authenticator is
	// configured: half, so that anonymous clients from many addresses can
	// never take what authenticated ones need.
	defaultAnonymousShare = 0.5
)

// errOverShare: a client asked for a session, a listen stream or a
// subscription while it held its share of the cap (Options.ClientShare),
// or while the anonymous clients together held theirs
// (Options.AnonymousShare). It is answered as the cap itself is: other
// clients are untouched.
var errOverShare = errors.New("mcpserve: client over its share of the cap")

// Reasons of a refusal, as the log names them.
const (
	reasonCap     = "cap"     // the cap itself was reached
	reasonShare   = "share"   // the client, or the anonymous clients together, held their share
	reasonSession = "session" // the session held Options.MaxSubscriptionsPerSession
)

// client is who holds a share: its principal's subject when the request
// authenticated, its remote IP otherwise. The zero client (a session over
// stdio or in memory, which has no remote address) holds no share and
// counts against the caps alone.
type client struct {
	key       string
	anonymous bool
}

// clientOf returns the client of an HTTP request. principal is the
// binding key bindingKey found; when sessions are not bound, the
// authenticator is asked here, so that a share follows the principal
// whatever the transport's mode.
func (s *Server) clientOf(r *http.Request, principal string) client {
	if strings.HasPrefix(principal, subjectKey) {
		return client{key: principal}
	}
	if !s.http.bind && s.http.auth {
		if cred := bearer(r.Header); cred != "" {
			if pr, err := bindsec.Authenticate(r.Context(), s.cat.Authenticator(), cred); err == nil {
				return client{key: subjectKey + pr.Subject()}
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return client{key: "addr:" + host, anonymous: true}
}

// shares splits one cap between clients: a client holds at most perClient
// of it, and the anonymous clients together at most anon. The cap's own
// total is counted by its owner (sessionSlots, listenStreams,
// subscriptions); shares counts what each client holds. Safe for
// concurrent use; a take or a give is one mutex and a map operation.
type shares struct {
	perClient, anon int64 // 0: no bound

	mu       sync.Mutex
	held     map[string]int64
	anonHeld int64
}

// newShares splits a cap of max; max <= 0 (no cap) splits nothing. The
// anonymous pool applies only with an authenticator: without one every
// client is anonymous, and the pool would only shrink the cap.
func newShares(max int, client, anon float64, auth bool) *shares {
	sh := &shares{held: map[string]int64{}}
	if max <= 0 {
		return sh
	}
	part := func(f float64) int64 { return max64(1, int64(math.Ceil(float64(max)*f))) }
	// A share of the whole cap bounds nothing the cap does not: it is off,
	// so that the cap alone answers.
	if client < 1 {
		sh.perClient = part(client)
	}
	if auth && anon < 1 {
		sh.anon = part(anon)
	}
	return sh
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// take counts one unit for c, or reports false when c (or the anonymous
// pool) holds its share already.
func (sh *shares) take(c client) bool {
	if c.key == "" || sh.perClient == 0 && sh.anon == 0 {
		return true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.perClient > 0 && sh.held[c.key] >= sh.perClient || (c.anonymous && sh.anon > 0 && sh.anonHeld >= sh.anon) {
		return false
	}
	sh.held[c.key]++
	if c.anonymous {
		sh.anonHeld++
	}
	return true
}

// give returns a unit take counted.
func (sh *shares) give(c client) {
	if c.key == "" || sh.perClient == 0 && sh.anon == 0 {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := sh.held[c.key] - 1; n > 0 {
		sh.held[c.key] = n
	} else {
		delete(sh.held, c.key)
	}
	if c.anonymous {
		sh.anonHeld--
	}
}

// refusals counts the refusals of one cap by reason, and logs them at
// most once a second: a greedy client can provoke thousands a second,
// and a line each would flood the log. The line that ends a quiet
// second says how many were left out before it.
type refusals struct {
	name                string
	cap, share, session atomic.Uint64
	mu                  sync.Mutex
	last                time.Time
	suppressed          int
}

// refusalClock is the time the refusal log's rate limit reads; tests
// set a clock of their own.
var refusalClock = time.Now

// refused counts a refusal and logs it unless one was logged less than a
// second ago.
func (rf *refusals) refused(log *slog.Logger, reason string, limit int64) {
	switch reason {
	case reasonShare:
		rf.share.Add(1)
	case reasonSession:
		rf.session.Add(1)
	default:
		rf.cap.Add(1)
	}
	rf.mu.Lock()
	now := refusalClock()
	if now.Sub(rf.last) < time.Second {
		rf.suppressed++
		rf.mu.Unlock()
		return
	}
	rf.last = now
	suppressed := rf.suppressed
	rf.suppressed = 0
	rf.mu.Unlock()
	log.Warn(fmt.Sprintf("mcpserve: %s refused", rf.name), "cap", rf.name, "reason", reason, "limit", limit,
		"suppressed", suppressed)
}

// refusalCounts are a Server's refusals, one per cap.
type refusalCounts struct {
	sessions, listens, subs refusals
}

func newRefusalCounts() *refusalCounts {
	rc := &refusalCounts{}
	rc.sessions.name, rc.listens.name, rc.subs.name = "sessions", "listen streams", "subscriptions"
	return rc
}

// shareOptions validates Options.ClientShare and Options.AnonymousShare
// and returns them with their defaults.
func shareOptions(o Options) (clientShare, anon float64, err error) {
	valid := func(f float64) bool { return f >= 0 && f <= 1 && !math.IsNaN(f) }
	if !valid(o.ClientShare) || !valid(o.AnonymousShare) {
		return 0, 0, fmt.Errorf("%w: a share must be a fraction in (0, 1] (0 for its default): ClientShare %v, AnonymousShare %v",
			ErrInvalidOptions, o.ClientShare, o.AnonymousShare)
	}
	return cmpOrF(o.ClientShare, defaultClientShare), cmpOrF(o.AnonymousShare, defaultAnonymousShare), nil
}

func cmpOrF(f, def float64) float64 {
	if f == 0 {
		return def
	}
	return f
}

// requestClient returns the client of the HTTP request that carried req;
// the zero client for a message that came another way, or whose request
// has ended.
func (s *Server) requestClient(req mcp.Request) client {
	if ex := req.GetExtra(); ex != nil {
		if hr, _ := s.calls.request(ex.Header); hr != nil {
			return hr.client
		}
	}
	return client{}
}
