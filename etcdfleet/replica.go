package etcdfleet

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Replica is one process's membership in a fleet: an etcd client, the
// session (one lease) its claims hang on, and the claims it holds. It is a
// catalog.Claimer: set it as catalog.Config.Claimer. All methods are safe
// for concurrent use.
//
// A Replica runs two goroutines besides the etcd client's. One waits for
// the session to end, and then kills the consumers that held claims and
// opens a new session (see the package doc); it also retries releases that
// failed. The other, the follower, keeps the replica's View.
type Replica struct {
	cfg    Config
	cli    *clientv3.Client
	ctx    context.Context // ends at Close; parent of every session
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor has returned
	kick   chan struct{} // a release failed: retry soon

	view       *View
	remote     *remote        // view as a catalog.Remote
	followDone chan struct{}  // closed when the follower has returned
	pause      chan struct{}  // tests: hold the follower, then let it go on
	undos      sync.WaitGroup // claims of unknown outcome being undone
	trust      *trust         // what the follower believes (trust.go)
	// incarnation names this process in its membership (holder.go).
	incarnation string
	// key is this replica's own (Config.Key or drawn at Join), and
	// enrollKey and enrollVal its enrollment, signed by the fleet
	// authority at Join and put again with each session (identity.go).
	key                  ed25519.PrivateKey
	enrollKey, enrollVal string
	seq                  atomic.Uint64 // the last membership renewal's (liveness.go)

	mu      sync.Mutex
	sess    *concurrency.Session // nil between sessions and once closed
	member  member               // the membership sess put (holder.go)
	ready   chan struct{}        // closed when sess is set
	claims  map[*claim]struct{}  // the claims made under sess, not released
	pending map[*claim]struct{}  // released under sess, delete not yet done
	closed  bool
	lost    int // sessions lost so far

	// claimPut, if set (by tests, before the first claim), is called by
	// Claim after its put succeeded and before it checks, under mu, that
	// the session it put under is still current: a test parks a claim
	// there to lose the session in between.
	claimPut func(key string)
	// beforeList, if set (tests), runs between a follower's watch opening
	// and its listing.
	beforeList func()
	// beforeApply, if set (tests), runs on the follower before it applies
	// one watch response's events, with the keys they touch; it may block
	// to hold the view at the revision before them. Atomic: a test sets it
	// while the follower runs.
	beforeApply atomic.Pointer[func(keys []string)]
}

// Join connects to the cluster at cfg.Endpoints, lists the fleet's claims
// into the replica's View and opens the replica's session. It returns only
// once both are done, so a cluster that does not answer within ctx gives
// ErrUnavailable (wrapping ctx's error), with the client closed and nothing
// granted or running; a bad Config gives ErrInvalidConfig before anything
// is dialled, credentials the cluster refuses give ErrAuthFailed, and a
// Config.Key that the fleet authority revoked gives ErrRevoked.
// Cost: four round trips (five with Config.Username): the watch the view
// follows opens before the listing, so that it follows from the start, and
// the session's lease is granted, then the replica's enrollment and
// membership put under it in one Txn (holder.go); each later session costs
// the last two again. Close the Replica when done.
func Join(ctx context.Context, cfg Config) (*Replica, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("etcdfleet: join: %w", err)
	}
	tr, err := newTrust(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: join: %w: %w", ErrInvalidConfig, err)
	}
	key := cfg.Key
	if key == nil {
		if _, key, err = ed25519.GenerateKey(nil); err != nil {
			return nil, fmt.Errorf("etcdfleet: join: %w", err)
		}
	}
	ekey, eval, err := tr.auth.enroll(cfg.Prefix, cfg.Replica, key.Public().(ed25519.PublicKey), cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: join: %w", err)
	}
	cli, err := dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: join %v: %w", cfg.Endpoints, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Replica{trust: tr, incarnation: newIncarnation(), key: key, enrollKey: ekey, enrollVal: eval,
		cfg: cfg, cli: cli, ctx: rctx, cancel: cancel,
		done: make(chan struct{}), kick: make(chan struct{}, 1),
		view: newView(), followDone: make(chan struct{}), pause: make(chan struct{}),
		ready: make(chan struct{}), claims: map[*claim]struct{}{}, pending: map[*claim]struct{}{},
	}
	r.remote = &remote{v: r.view}
	rev, wch, wcancel, err := r.watchAndList(ctx)
	if err != nil {
		cancel()
		_ = cli.Close()
		return nil, fmt.Errorf("etcdfleet: join %v: %w", cfg.Endpoints, err)
	}
	s, m, err := r.open(ctx)
	if err != nil {
		wcancel()
		cancel()
		_ = cli.Close()
		return nil, fmt.Errorf("etcdfleet: join %v: %w", cfg.Endpoints, err)
	}
	r.install(s, m)
	go r.supervise(s)
	go r.follow(rev, wch, wcancel)
	r.undos.Add(1)
	go r.renewals()
	return r, nil
}

// open grants a lease within ctx, keeps it alive under r.ctx, and puts
// the replica's membership under it.
func (r *Replica) open(ctx context.Context) (*concurrency.Session, member, error) {
	lease, err := r.cli.Grant(ctx, int64(r.cfg.TTL/time.Second))
	if err != nil {
		return nil, member{}, unavailable(err)
	}
	s, err := concurrency.NewSession(r.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(r.ctx))
	if err != nil {
		r.revoke(lease.ID)
		return nil, member{}, unavailable(err)
	}
	rev, err := r.join(ctx, s)
	if err != nil {
		s.Orphan()
		r.revoke(lease.ID)
		return nil, member{}, err
	}
	return s, member{rev: rev}, nil
}

// renewals renews the membership every TTL/2 under the current session
// (liveness.go), until the replica closes.
func (r *Replica) renewals() {
	defer r.undos.Done()
	t := time.NewTicker(r.renewEvery())
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		s := r.sess
		r.mu.Unlock()
		if s != nil {
			r.renew(s)
		}
	}
}

// unavailable marks a cluster that did not answer, keeping the cause.
func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

// revoke revokes a lease, best effort: it deletes the lease's keys now
// rather than at expiry.
func (r *Replica) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.OpTimeout)
	defer cancel()
	if _, err := r.cli.Revoke(ctx, id); err != nil {
		r.cfg.Logger.Warn("etcdfleet: revoke", zap.Int64("lease", int64(id)), zap.Error(err))
	}
}

// install makes s, with its membership m, the current session.
func (r *Replica) install(s *concurrency.Session, m member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.sess, r.member = s, m
	close(r.ready)
	return true
}

// session returns the current session, waiting within ctx for one while
// the replica is between sessions.
func (r *Replica) session(ctx context.Context) (*concurrency.Session, error) {
	for {
		r.mu.Lock()
		s, ready, closed := r.sess, r.ready, r.closed
		r.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case s != nil:
			return s, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for a new session: %w", ErrSessionLost, ctx.Err())
		case <-r.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// supervise waits for the session to end and retries failed releases.
func (r *Replica) supervise(s *concurrency.Session) {
	defer close(r.done)
	var retry <-chan time.Time
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
			retry = time.After(0)
		case <-retry:
			retry = nil
			if !r.retryPending() {
				retry = time.After(backoff)
				backoff = min(2*backoff, time.Second)
			} else {
				backoff = 10 * time.Millisecond
			}
		case <-s.Done():
			if r.ctx.Err() != nil {
				return // Close orphaned it
			}
			r.lose(s)
			if s = r.reopen(); s == nil {
				return
			}
			r.requestRelist()
			retry = nil
		}
	}
}

// lose handles the end of session s: the lease is gone, or will be by the
// time anybody could act on it, so every consumer that held a claim under
// it dies, as a crashed process's would. Then the lease is revoked, best
// effort, so that its keys go now and not at expiry.
func (r *Replica) lose(s *concurrency.Session) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	lost := r.claims
	r.claims, r.pending = map[*claim]struct{}{}, map[*claim]struct{}{}
	clear(r.trust.held)
	r.sess, r.ready = nil, make(chan struct{})
	r.lost++
	r.mu.Unlock()
	// Its own routes die now, and other replicas' may have changed
	// unseen: the view lists nothing until a listing under the next
	// session (the package doc's "While etcd stalls").
	r.view.hide()
	r.cfg.Logger.Warn("etcdfleet: session lost; killing its consumers", zap.Int64("lease", int64(s.Lease())), zap.Int("claims", len(lost)))
	for c := range lost {
		c.kill()
	}
	r.revoke(s.Lease())
}

// reopen opens a new session, retrying with backoff until it succeeds or
// the replica closes (nil).
func (r *Replica) reopen() *concurrency.Session {
	backoff := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
		s, m, err := r.open(ctx)
		cancel()
		if err == nil {
			if r.install(s, m) {
				return s
			}
			s.Orphan()
			r.revoke(s.Lease())
			return nil
		}
		r.cfg.Logger.Warn("etcdfleet: new session", zap.Error(err))
		select {
		case <-r.ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// retryPending retries the deletes of released claims that failed; it
// reports whether none is left.
func (r *Replica) retryPending() bool {
	r.mu.Lock()
	todo := make([]*claim, 0, len(r.pending))
	for c := range r.pending {
		todo = append(todo, c)
	}
	r.mu.Unlock()
	for _, c := range todo {
		if err := c.delete(); err != nil {
			continue
		}
		r.mu.Lock()
		delete(r.pending, c)
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) == 0
}

// Close leaves the fleet: it kills every local consumer that holds a claim
// (their names are about to be free fleet-wide, so none may go on serving
// one), revokes the lease, which deletes all of the replica's keys in one
// revision, and closes the client. ctx bounds the revoke; if it ends first,
// the keys go when the lease expires. A second Close returns nil.
func (r *Replica) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	s, claims := r.sess, r.claims
	r.sess, r.claims, r.pending = nil, nil, nil
	r.mu.Unlock()
	r.cancel()
	<-r.done
	<-r.followDone
	r.undos.Wait()
	for c := range claims {
		c.kill()
	}
	var err error
	if s != nil {
		// A lease already gone (revoked with the replica's key: see
		// Revoke) took the keys with it.
		if _, e := r.cli.Revoke(ctx, s.Lease()); e != nil && !errors.Is(e, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("etcdfleet: close: revoke: %w", unavailable(e))
		}
	}
	return errors.Join(err, r.cli.Close())
}

// Name returns the replica's name, as its claims record it.
func (r *Replica) Name() string { return r.cfg.Replica }

// Lease returns the current session's lease, or clientv3.NoLease between
// sessions and once closed.
func (r *Replica) Lease() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sess == nil {
		return clientv3.NoLease
	}
	return r.sess.Lease()
}

// SessionsLost returns how many sessions the replica has lost.
func (r *Replica) SessionsLost() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}
