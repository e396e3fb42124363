package etcdfleet

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livereg/livereg/catalog"
)

// View is a replica's read-only view of the fleet's claims, every
// replica's, its own included, as of one etcd revision. The replica's
// follower keeps it up to date from a watch on the prefix, with only the
// records the fleet signed that are valid routes. While the replica is
// between sessions (from the loss of one until a listing under the next)
// the view is hidden: it lists nothing and holds no claim. All methods are
// safe for concurrent use; listings (Tools, Resources, Prompts, Templates)
// are sorted and cached, so an unchanged view lists in O(1) without
// allocating.
type View struct {
	mu      sync.Mutex
	recs    map[string]Record // by key
	rev     int64             // the etcd revision the view reflects
	tools   []ToolDesc        // cached listings; nil once stale
	hidden  bool              // between sessions: list and hold nothing
	hides   uint64            // how many times it was hidden
	res     []ResourceDesc
	prompts []PromptDesc
	tmpls   []TemplateDesc
	watch   []func() // called after every change; see Watch
	version atomic.Uint64
	// toolsVersion, resourcesVersion, promptsVersion and templatesVersion
	// grow with the changes to their own listing, for a catalog that
	// merges the view (Replica.Remote).
	toolsVersion, resourcesVersion   atomic.Uint64
	promptsVersion, templatesVersion atomic.Uint64
	changed                          atomic.Pointer[chan struct{}]
}

func newView() *View {
	v := &View{recs: map[string]Record{}}
	ch := make(chan struct{})
	v.changed.Store(&ch)
	return v
}

// Tools returns the fleet's claimed tools, sorted by name. The slice is
// shared: do not modify it.
func (v *View) Tools() []ToolDesc {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tools == nil {
		v.tools = []ToolDesc{}
		for _, rec := range v.shown() {
			if rec.Tool != nil {
				v.tools = append(v.tools, *rec.Tool)
			}
		}
		slices.SortFunc(v.tools, func(a, b ToolDesc) int { return strings.Compare(a.Name, b.Name) })
	}
	return v.tools
}

// Resources returns the fleet's claimed resources, sorted by URI. The
// slice is shared: do not modify it.
func (v *View) Resources() []ResourceDesc {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.res == nil {
		v.res = []ResourceDesc{}
		for _, rec := range v.shown() {
			if rec.Resource != nil {
				v.res = append(v.res, *rec.Resource)
			}
		}
		slices.SortFunc(v.res, func(a, b ResourceDesc) int { return strings.Compare(a.URI, b.URI) })
	}
	return v.res
}

// Prompts returns the fleet's claimed prompts, sorted by name. The slice
// is shared: do not modify it.
func (v *View) Prompts() []PromptDesc {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.prompts == nil {
		v.prompts = []PromptDesc{}
		for _, rec := range v.shown() {
			if rec.Prompt != nil {
				v.prompts = append(v.prompts, *rec.Prompt)
			}
		}
		slices.SortFunc(v.prompts, func(a, b PromptDesc) int { return strings.Compare(a.Name, b.Name) })
	}
	return v.prompts
}

// Templates returns the fleet's claimed resource templates, sorted by key
// (catalog.TemplateKey, the order of a catalog's template listing). The
// slice is shared: do not modify it. Rebuilding it after a change costs
// a parse of every template.
func (v *View) Templates() []TemplateDesc {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tmpls == nil {
		type keyed struct {
			key string
			d   TemplateDesc
		}
		var ks []keyed
		for _, rec := range v.shown() {
			if rec.Template != nil {
				// The follower checked that it has a key.
				key, _ := catalog.TemplateKey(rec.Template.URITemplate)
				ks = append(ks, keyed{key, *rec.Template})
			}
		}
		slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
		v.tmpls = make([]TemplateDesc, len(ks))
		for i, k := range ks {
			v.tmpls[i] = k.d
		}
	}
	return v.tmpls
}

// Holder returns the record of the claim on key, if the view has one: a
// record the fleet signed, valid for key, and none while the view is
// hidden.
func (v *View) Holder(key string) (Record, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hidden {
		return Record{}, false
	}
	rec, ok := v.recs[key]
	return rec, ok
}

// renewal reports whether rec, a record admitted for key, is a renewal of
// the membership the view holds there: the same replica, endpoint and
// incarnation, which the view need not apply (liveness.go). Only the
// follower calls it.
func (v *View) renewal(key string, rec Record) bool {
	if rec.Kind != KindReplica {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.recs[key]
	return ok && old.Replica == rec.Replica && old.Endpoint == rec.Endpoint && old.Incarnation == rec.Incarnation
}

// advance moves the view to rev when the events up to it changed none of
// its records: no version moves, and nobody is told.
func (v *View) advance(rev int64) {
	v.mu.Lock()
	v.rev = rev
	v.mu.Unlock()
}

// keysOf returns the keys of the records the view holds of the replicas
// named. Only the follower calls it; O(records).
func (v *View) keysOf(replicas map[string]bool) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var keys []string
	for k, rec := range v.recs {
		if replicas[rec.Replica] {
			keys = append(keys, k)
		}
	}
	return keys
}

// shown returns the records the view shows: none while hidden. v.mu is
// held.
func (v *View) shown() map[string]Record {
	if v.hidden {
		return nil
	}
	return v.recs
}

// hide hides the view (see View), and announces the change.
func (v *View) hide() {
	v.mu.Lock()
	v.hides++
	was := v.hidden
	v.hidden = true
	v.stale()
	watch := v.watch
	v.mu.Unlock()
	if !was {
		v.allVersions()
		v.notify(watch)
	}
}

// isHidden reports whether the view is hidden.
func (v *View) isHidden() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hidden
}

// hideGen returns how many times the view was hidden: a listing read
// before hide is no reason to show it again.
func (v *View) hideGen() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hides
}

// Revision returns the etcd revision the view reflects.
func (v *View) Revision() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rev
}

// Version grows with every change to the view. One atomic load.
func (v *View) Version() uint64 { return v.version.Load() }

// Changes returns a channel that is closed at the next change to the view.
func (v *View) Changes() <-chan struct{} { return *v.changed.Load() }

// Watch arranges for f to be called after every change to the view, from
// the replica's follower goroutine, once the versions have grown. f must
// not block: the follower waits for it.
func (v *View) Watch(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.watch = append(v.watch, f)
}

// reset replaces the view with a full listing at rev. show says the
// listing began under a live session, and gen is hideGen as it was then:
// the view is shown again if it has not been hidden since.
func (v *View) reset(recs map[string]Record, rev int64, show bool, gen uint64) {
	v.mu.Lock()
	v.recs, v.rev = recs, rev
	if show && v.hides == gen {
		v.hidden = false
	}
	v.stale()
	watch := v.watch
	v.mu.Unlock()
	v.allVersions()
	v.notify(watch)
}

// apply applies one watch response's events, already decoded: a nil
// record deletes its key.
func (v *View) apply(puts map[string]*Record, rev int64) {
	var tools, resources, prompts, templates bool // which listings change
	touch := func(rec Record) {
		tools = tools || rec.Tool != nil
		resources = resources || rec.Resource != nil
		prompts = prompts || rec.Prompt != nil
		templates = templates || rec.Template != nil
	}
	v.mu.Lock()
	for k, rec := range puts {
		if old, ok := v.recs[k]; ok {
			touch(old)
		}
		if rec == nil {
			delete(v.recs, k)
		} else {
			touch(*rec)
			v.recs[k] = *rec
		}
	}
	v.rev = rev
	v.stale()
	watch := v.watch
	v.mu.Unlock()
	for _, k := range []struct {
		changed bool
		version *atomic.Uint64
	}{{tools, &v.toolsVersion}, {resources, &v.resourcesVersion}, {prompts, &v.promptsVersion}, {templates, &v.templatesVersion}} {
		if k.changed {
			k.version.Add(1)
		}
	}
	v.notify(watch)
}

// stale drops the cached listings. v.mu is held.
func (v *View) stale() {
	v.tools, v.res, v.prompts, v.tmpls = nil, nil, nil, nil
}

// allVersions grows every kind's version: the whole view changed.
func (v *View) allVersions() {
	v.toolsVersion.Add(1)
	v.resourcesVersion.Add(1)
	v.promptsVersion.Add(1)
	v.templatesVersion.Add(1)
}

// notify announces a change, after the per-kind versions grew: to
// Version and Changes readers, then to watch.
func (v *View) notify(watch []func()) {
	v.version.Add(1)
	ch := make(chan struct{})
	close(*v.changed.Swap(&ch))
	for _, f := range watch {
		f()
	}
}
