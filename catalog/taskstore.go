package catalog

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/livereg/livereg/internal/quote"
)

// The store of a catalog's tasks (task.go): bounded in all, per share
// and for the anonymous shares together (taskshare.go), with a byte
// budget for kept results, and swept of expired tasks by its own
// operations, never by a timer.

// taskStore holds a catalog's tasks.
type taskStore struct {
	mu        sync.Mutex
	byID      map[string]*task
	perCaller map[[32]byte]int // by share (taskshare.go)
	anonHeld  int              // held by anonymous shares
	ended     []*task          // ended tasks, in the order they ended, which is the order they expire
	bytes     int64
	max       int
	perMax    int
	anonMax   int // 0: no pool
	lifetime  time.Duration
	maxBytes  int64
	ttl       time.Duration
	now       func() time.Time
}

// Defaults of the task store's bounds.
const (
	defaultMaxTasks          = 10000
	defaultMaxTasksPerCaller = 100
	defaultMaxTaskBytes      = 64 << 20
	defaultTaskTTL           = 15 * time.Minute
)

func newTaskStore(cfg Config) (*taskStore, error) {
	if cfg.MaxTasks < 0 || cfg.MaxTasksPerCaller < 0 || cfg.MaxTaskResultBytes < 0 || cfg.TaskTTL < 0 {
		return nil, fmt.Errorf("%w: negative task bound", ErrInvalidConfig)
	}
	maxTasks := orDefault(cfg.MaxTasks, defaultMaxTasks)
	anonMax := cfg.MaxAnonymousTasks
	if anonMax == 0 {
		anonMax = max(1, int(float64(maxTasks)*defaultAnonymousTasks))
	}
	lifetime := cmpOrDuration(cfg.MaxTaskLifetime, defaultTaskLifetime)
	return &taskStore{
		anonMax: max(anonMax, 0), lifetime: max(lifetime, 0),
		byID: map[string]*task{}, perCaller: map[[32]byte]int{},
		max: maxTasks, perMax: orDefault(cfg.MaxTasksPerCaller, defaultMaxTasksPerCaller),
		maxBytes: cmpOrInt64(cfg.MaxTaskResultBytes, defaultMaxTaskBytes),
		ttl:      cmpOrDuration(cfg.TaskTTL, defaultTaskTTL), now: time.Now,
	}, nil
}

func cmpOrDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func cmpOrInt64(n, def int64) int64 {
	if n == 0 {
		return def
	}
	return n
}

// read returns t as it reads now. A task still working whose consumer is
// dead ends here, failed: the death is its end, whether or not its
// after-death function has run yet.
func (s *taskStore) read(t *task) TaskInfo {
	if !t.ref.Alive() && s.end(t, TaskFailed, Result{}, deathError(t.tool, t.ref)) {
		t.cancel()
	}
	return t.info()
}

// sweep drops the ended tasks whose time is up; s.mu is held.
func (s *taskStore) sweep(now time.Time) {
	n := 0
	for _, t := range s.ended {
		t.mu.Lock()
		exp := t.expires
		t.mu.Unlock()
		if now.Before(exp) {
			break
		}
		s.drop(t)
		n++
	}
	s.ended = s.ended[n:]
}

// drop removes t from the store; s.mu is held.
func (s *taskStore) drop(t *task) {
	delete(s.byID, t.id)
	if s.perCaller[t.share]--; s.perCaller[t.share] <= 0 {
		delete(s.perCaller, t.share)
	}
	if t.anon {
		s.anonHeld--
	}
	s.bytes -= t.size
}

// end ends t with status, res and err, if it is still working; a result
// that does not fit the budget fails it instead. Once its consumer is dead
// any end but a failure is the death's failure: the death is its end,
// though its body returned, or a CancelTask came, before the after-death
// function (endTasks) ran. It reports whether t ended now.
func (s *taskStore) end(t *task, status TaskStatus, res Result, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	t.mu.Lock()
	if t.status != TaskWorking && t.status != TaskInputRequired {
		t.mu.Unlock()
		return false
	}
	if status != TaskFailed && !t.ref.Alive() {
		status, res, err = TaskFailed, Result{}, deathError(t.tool, t.ref)
	}
	t.asked, t.answers = nil, nil
	if status == TaskCompleted {
		if size := resultSize(res); s.bytes+size > s.maxBytes {
			status, res = TaskFailed, Result{}
			err = fmt.Errorf("catalog: task %s: %w: its result of %d bytes does not fit the %d bytes kept for results", t.id, ErrTooManyTasks, size, s.maxBytes)
		} else {
			t.size = size
			s.bytes += size
		}
	}
	t.status, t.res, t.err = status, res, err
	t.updated, t.expires = now, now.Add(s.ttl)
	t.changedLocked()
	t.mu.Unlock()
	close(t.done)
	s.ended = append(s.ended, t)
	return true
}

// resultSize is what a result counts against the budget: its text and
// data, and a word per item.
func resultSize(r Result) int64 {
	var n int64
	for _, c := range r.Content {
		n += int64(len(c.Text)+len(c.Data)+len(c.MIMEType)) + 16
		if c.Resource != nil {
			n += int64(len(c.Resource.Text) + len(c.Resource.Blob) + len(c.Resource.URI))
		}
	}
	if r.StructuredContent != nil {
		n += 256 // an estimate: encoding it here would cost more than it saves
	}
	return n
}

// callerKey is the credential as the store compares it.
func callerKey(credential string) [32]byte { return sha256.Sum256([]byte(credential)) }

// newTaskID returns 128 random bits, base64url.
func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's doc)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// add puts t in the store, within its caps.
func (s *taskStore) add(t *task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweep(now)
	if len(s.byID) >= s.max {
		return fmt.Errorf("catalog: %w: %d tasks held, the most the catalog keeps", ErrTooManyTasks, len(s.byID))
	}
	if err := s.overShare(t); err != nil {
		return err
	}
	t.created, t.updated = now, now
	s.byID[t.id] = t
	s.perCaller[t.share]++
	if t.anon {
		s.anonHeld++
	}
	return nil
}

// counts reads what the store holds; expired tasks are dropped first.
func (s *taskStore) counts() TaskCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
	n := TaskCounts{Held: len(s.byID), ResultBytes: s.bytes}
	for _, k := range s.perCaller {
		n.MostPerCaller = max(n.MostPerCaller, k)
	}
	return n
}

// remove takes out a task that never ran.
func (s *taskStore) remove(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(t)
}

// find returns the task id as credential may see it.
func (s *taskStore) find(id, credential string) (*task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
	t, ok := s.byID[id]
	if !ok || t.caller != callerKey(credential) {
		return nil, fmt.Errorf("catalog: task %s: %w", quote.Name(id), ErrNotFound)
	}
	return t, nil
}
