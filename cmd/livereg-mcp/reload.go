package main

// Files loaded again when they change: the TLS certificate of -tls-cert
// and -tls-key, and the CAs of -fleet-ca, so that rotating them needs no
// restart. A change is noticed by the files' identities, modification
// times and sizes, looked at no more than once per reloadInterval, when the value is next
// used (a TLS handshake); SIGHUP loads them at once. A new pair written
// one file at a time may be seen half written: that load fails, the value
// held is kept, and the next look, after the second file's write, loads
// the pair.

import (
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// reloadInterval is how often, at most, a reloader looks at its files.
const reloadInterval = time.Second

// fileStamp is what tells a file's change: the file (its inode, which a
// rename-into-place replaces), its modification time and its size; nil
// for a file that cannot be stat'ed. The time alone could miss a rewrite:
// file systems stamp it with a coarse clock.
type fileStamp struct{ fi os.FileInfo }

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == nil && b.fi == nil
	}
	return os.SameFile(a.fi, b.fi) && a.fi.ModTime().Equal(b.fi.ModTime()) && a.fi.Size() == b.fi.Size()
}

// reloader holds a value loaded from files, and loads it again when they
// change. A load that fails keeps the value held and logs an error once
// per change of the files.
//
// get is safe for concurrent use. It costs an atomic load, and, for the
// first caller after each reloadInterval, a stat of each file; a caller
// that finds another looking goes on with the value held rather than
// wait. A load runs in the caller that saw the change.
type reloader[T any] struct {
	what  string // in the log, such as "the TLS certificate"
	files []string
	load  func() (*T, error)

	log  atomic.Pointer[slog.Logger]
	cur  atomic.Pointer[T]
	next atomic.Int64 // when to look again, in Unix nanoseconds

	mu   sync.Mutex  // held while looking or loading
	seen []fileStamp // of the last look that loaded, or tried to
}

// newReloader loads the value from files with load, and returns its
// reloader, or load's error.
func newReloader[T any](what string, load func() (*T, error), files ...string) (*reloader[T], error) {
	r := &reloader[T]{what: what, files: files, load: load}
	r.log.Store(slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.seen = r.stamps()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(v)
	r.next.Store(time.Now().Add(reloadInterval).UnixNano())
	return r, nil
}

// setLogger sets where reloads and failed loads are logged.
func (r *reloader[T]) setLogger(log *slog.Logger) { r.log.Store(log) }

// get returns the value, loading it again first if the files changed.
func (r *reloader[T]) get() *T {
	// TryLock: a handshake never waits for another's look at the files.
	if time.Now().UnixNano() >= r.next.Load() && r.mu.TryLock() {
		r.look(false)
		r.mu.Unlock()
	}
	return r.cur.Load()
}

// reload loads the value again now, whether the files changed or not.
func (r *reloader[T]) reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.look(true)
}

// look loads the value if force or if the files changed since the last
// look that loaded. r.mu is held.
func (r *reloader[T]) look(force bool) {
	defer func() { r.next.Store(time.Now().Add(reloadInterval).UnixNano()) }()
	now := r.stamps()
	if !force && slices.EqualFunc(now, r.seen, fileStamp.same) {
		return
	}
	r.seen = now
	log := r.log.Load()
	v, err := r.load()
	if err != nil {
		log.Error("cannot load "+r.what+"; keeping the one loaded before", "files", r.files, "err", err)
		return
	}
	r.cur.Store(v)
	log.Info("loaded "+r.what+" again", "files", r.files)
}

// stamps stats the files.
func (r *reloader[T]) stamps() []fileStamp {
	out := make([]fileStamp, len(r.files))
	for i, name := range r.files {
		if fi, err := os.Stat(name); err == nil {
			out[i] = fileStamp{fi}
		}
	}
	return out
}
