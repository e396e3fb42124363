package shardreg_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"pgregory.net/rapid"
)

// refModel is the registry's documented semantics, written as plainly as
// possible: a map and one alive flag per owner. It is the oracle of the
// model-based test and of the fuzz targets, so it must follow the package
// and method docs, never the implementation.
type refModel struct {
	cap      int
	validate bool // the registry was made WithValidator(shardreg.ToolName)
	alive    []bool
	entries  map[string]refEntry
	// changes counts the changes a listing can see (inserts, replacements,
	// removals, ready flips): what Version promises to track.
	changes int
	// listed is the last listing, which ListReady serves again, without
	// reclaiming anything, while nothing changed and its owners live.
	listed *refListing
}

// refListing is a listing ListReady may serve again, and when it was taken.
type refListing struct {
	items   []refItem
	changes int
}

// refEntry is one entry of the model. owner indexes refModel.alive; -1 is
// the zero Ref.
type refEntry struct {
	value string
	owner int
	ready bool
}

// refItem is a listed entry.
type refItem struct {
	name, value string
	owner       int
}

func newRefModel(capacity int, validate bool) *refModel {
	return &refModel{cap: capacity, validate: validate, entries: map[string]refEntry{}}
}

func (m *refModel) mint() int {
	m.alive = append(m.alive, true)
	return len(m.alive) - 1
}

func (m *refModel) release(o int) { m.alive[o] = false }

func (m *refModel) isAlive(o int) bool { return o >= 0 && m.alive[o] }

func (m *refModel) validName(name string) bool {
	if name == "" || len(name) > shardreg.MaxNameLen || !utf8.ValidString(name) {
		return false
	}
	return !m.validate || shardreg.ToolName(name) == nil
}

// sweep removes every dead-owner entry and reports how many it removed.
func (m *refModel) sweep() int {
	n := 0
	for name, e := range m.entries {
		if !m.isAlive(e.owner) {
			delete(m.entries, name)
			n++
		}
	}
	m.changes += n
	return n
}

// register is Register (ready false), RegisterReady (ready) and Overwrite
// (ready and overwrite), checked in the documented order.
func (m *refModel) register(name, value string, o int, ready, overwrite bool) error {
	if !m.validName(name) {
		return shardreg.ErrInvalidName
	}
	if !m.isAlive(o) {
		return shardreg.ErrDeadOwner
	}
	cur, held := m.entries[name]
	switch {
	case held && !overwrite && m.isAlive(cur.owner):
		return shardreg.ErrDuplicate
	case held:
		// A takeover replaces in place and keeps the slot.
	case len(m.entries) >= m.cap:
		m.sweep()
		if len(m.entries) >= m.cap {
			return shardreg.ErrCapReached
		}
	}
	m.entries[name] = refEntry{value: value, owner: o, ready: ready}
	m.changes++
	return nil
}

func (m *refModel) markReady(name string, o int) bool {
	e, ok := m.entries[name]
	if !ok || o < 0 || e.owner != o || !m.isAlive(o) {
		return false
	}
	if !e.ready {
		e.ready = true
		m.entries[name] = e
		m.changes++
	}
	return true
}

func (m *refModel) resolve(name string) (refEntry, bool) {
	e, ok := m.entries[name]
	switch {
	case !ok:
		return refEntry{}, false
	case !m.isAlive(e.owner):
		delete(m.entries, name)
		m.changes++
		return refEntry{}, false
	case !e.ready:
		return refEntry{}, false
	}
	return e, true
}

func (m *refModel) unregisterOwned(name string, o int) bool {
	e, ok := m.entries[name]
	if !ok || o < 0 || e.owner != o {
		return false
	}
	delete(m.entries, name)
	m.changes++
	return true
}

// listReady serves the last listing while nothing changed since and every
// owner it lists is alive: it is still the listing. Otherwise it sweeps the
// dead entries, as a listing that takes a new snapshot does, and lists.
func (m *refModel) listReady() []refItem {
	if l := m.listed; l != nil && l.changes == m.changes {
		live := true
		for _, it := range l.items {
			live = live && m.isAlive(it.owner)
		}
		if live {
			return l.items
		}
	}
	m.sweep()
	var out []refItem
	for _, name := range slices.Sorted(maps.Keys(m.entries)) {
		if e := m.entries[name]; e.ready {
			out = append(out, refItem{name: name, value: e.value, owner: e.owner})
		}
	}
	m.listed = &refListing{items: out, changes: m.changes}
	return out
}

// page is one Page call resuming after the name after ("" for the first
// page): the entries it returns and whether a next page exists.
func (m *refModel) page(after string, limit int) ([]refItem, bool) {
	if limit <= 0 {
		limit = shardreg.DefaultPageSize
	}
	list := m.listReady()
	i := 0
	if after != "" {
		for i < len(list) && list[i].name <= after {
			i++
		}
	}
	end := i + min(limit, len(list)-i)
	return list[i:end], end < len(list)
}

func (m *refModel) prune() int { return m.sweep() }

func (m *refModel) len() int { return len(m.entries) }

// duo drives a real registry and the model in lockstep and compares every
// result. Its methods take a rapid.TB so that rapid's T and the fuzzer's
// T can both drive it.
type duo struct {
	r       *shardreg.Registry[string]
	m       *refModel
	toks    []*owner.Token
	version uint64
	changes int

	// A walk in progress: the cursor Page handed out, and the name the
	// model resumes after.
	cursor, after string
}

func newDuo(t rapid.TB, capacity int, validate bool) *duo {
	opts := []shardreg.Option{shardreg.WithCap(capacity)}
	if validate {
		opts = append(opts, shardreg.WithValidator(shardreg.ToolName))
	}
	r, err := shardreg.New[string](opts...)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	return &duo{r: r, m: newRefModel(capacity, validate)}
}

// close releases every owner. A token left to the garbage collector would
// die at a random later time, in the middle of some other test.
func (d *duo) close() {
	for _, tok := range d.toks {
		tok.Release()
	}
}

func (d *duo) ref(o int) owner.Ref {
	if o < 0 {
		return owner.Ref{}
	}
	return d.toks[o].Ref()
}

func (d *duo) mint() int {
	d.toks = append(d.toks, owner.New())
	return d.m.mint()
}

func (d *duo) release(o int) {
	d.toks[o].Release()
	d.m.release(o)
}

// register kinds.
const (
	kindRegister = iota
	kindRegisterReady
	kindOverwrite
)

var kindNames = [...]string{"Register", "RegisterReady", "Overwrite"}

func (d *duo) register(t rapid.TB, kind int, name, value string, o int) {
	var got error
	switch kind {
	case kindRegister:
		got = d.r.Register(name, value, d.ref(o))
	case kindRegisterReady:
		got = d.r.RegisterReady(name, value, d.ref(o))
	default:
		got = d.r.Overwrite(name, value, d.ref(o))
	}
	want := d.m.register(name, value, o, kind != kindRegister, kind == kindOverwrite)
	requireErrorKind(t, want, got, "%s(%q, %q, o%d)", kindNames[kind], name, value, o)
	if got != nil {
		var e *shardreg.Error
		if !errors.As(got, &e) {
			t.Fatalf("%s(%q, %q, o%d) = %v, want a *shardreg.Error", kindNames[kind], name, value, o, got)
		}
		if e.Op != "register" {
			t.Errorf(`e.Op = %q, want "register"`, e.Op)
		}
		if e.Name != name {
			t.Errorf("the error names the name: e.Name = %q, want %q", e.Name, name)
		}
	}
}

// requireErrorKind fails unless got is want as errors.Is sees it, and is
// none of the other sentinels: a refusal has exactly one reason.
func requireErrorKind(t rapid.TB, want, got error, format string, args ...any) {
	if want == nil {
		if got != nil {
			t.Fatalf("%s = %v, want nil", fmt.Sprintf(format, args...), got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("%s = %v, want %v", fmt.Sprintf(format, args...), got, want)
	}
	for _, other := range []error{shardreg.ErrInvalidName, shardreg.ErrDeadOwner, shardreg.ErrDuplicate, shardreg.ErrCapReached} {
		if other != want && errors.Is(got, other) {
			t.Fatalf("%s = %v, which is %v as well as %v: a refusal has one reason", fmt.Sprintf(format, args...), got, other, want)
		}
	}
}

func (d *duo) markReady(t rapid.TB, name string, o int) {
	if got, want := d.r.MarkReady(name, d.ref(o)), d.m.markReady(name, o); got != want {
		t.Fatalf("MarkReady(%q, o%d) = %v, the model says %v", name, o, got, want)
	}
}

func (d *duo) resolve(t rapid.TB, name string) {
	e, ok := d.r.Resolve(name)
	want, wantOK := d.m.resolve(name)
	if ok != wantOK {
		t.Fatalf("Resolve(%q): ok = %v, want %v", name, ok, wantOK)
	}
	if !ok {
		if e != (shardreg.Entry[string]{}) {
			t.Fatalf("Resolve(%q) missed but returned %+v, want the zero Entry", name, e)
		}
		return
	}
	if e.Name != name {
		t.Fatalf("e.Name = %q, want %q", e.Name, name)
	}
	if e.Value != want.value {
		t.Fatalf("e.Value = %q, want %q", e.Value, want.value)
	}
	if !e.Ready {
		t.Fatal("e.Ready = false, want true")
	}
	if !e.Owner.Same(d.ref(want.owner)) {
		t.Fatalf("Resolve(%q) owner: e.Owner.Same(d.ref(want.owner)) = false, want true", name)
	}
	if !e.Owner.Alive() {
		t.Fatal("e.Owner.Alive() = false, want true")
	}
}

func (d *duo) unregisterOwned(t rapid.TB, name string, o int) {
	if got, want := d.r.UnregisterOwned(name, d.ref(o)), d.m.unregisterOwned(name, o); got != want {
		t.Fatalf("UnregisterOwned(%q, o%d) = %v, the model says %v", name, o, got, want)
	}
}

func (d *duo) listReady(t rapid.TB) {
	got := d.r.ListReady()
	requireSortedLive(t, got)
	d.requireList(t, d.m.listReady(), got, "ListReady")
}

func (d *duo) validate(t rapid.TB, name string) {
	err := d.r.Validate(name)
	if d.m.validName(name) {
		if err != nil {
			t.Fatalf("Validate(%q): err: %v", name, err)
		}
		return
	}
	if !errors.Is(err, shardreg.ErrInvalidName) {
		t.Fatalf("Validate(%q): err = %v, want %v", name, err, shardreg.ErrInvalidName)
	}
	var e *shardreg.Error
	if !errors.As(err, &e) {
		t.Fatalf("Validate(%q) = %v, want a *shardreg.Error", name, err)
	}
	if e.Name != name {
		t.Fatalf("e.Name = %q, want %q", e.Name, name)
	}
}

func (d *duo) requireList(t rapid.TB, want []refItem, got []shardreg.Entry[string], what string) {
	if got, want := entryNames(got), itemNames(want); !slices.Equal(got, want) {
		t.Fatalf("%s: entryNames(got) = %v, want %v", what, got, want)
	}
	for i, e := range got {
		if e.Value != want[i].value {
			t.Fatalf("%s: %s: e.Value = %q, want %q", what, e.Name, e.Value, want[i].value)
		}
		if !e.Ready {
			t.Fatalf("%s: %s: e.Ready = false, want true", what, e.Name)
		}
		if !e.Owner.Same(d.ref(want[i].owner)) {
			t.Fatalf("%s: owner of %s: e.Owner.Same(d.ref(want[i].owner)) = false, want true", what, e.Name)
		}
		if !e.Owner.Alive() {
			t.Fatalf("%s: a dead owner's entry is listed: e.Owner.Alive() = false, want true", what)
		}
	}
}

func itemNames(items []refItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.name
	}
	return out
}

func entryNames(es []shardreg.Entry[string]) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// walk pages through the whole listing with nothing changing in between:
// the pages must add up to ListReady.
func (d *duo) walk(t rapid.TB, limit int) {
	var got []shardreg.Entry[string]
	var want []refItem
	cursor, after := "", ""
	for pages := 0; ; pages++ {
		if pages >= 1000 {
			t.Fatalf("a walk must end: pages = %v, want < 1000", pages)
		}
		page, next, err := d.r.Page(cursor, limit)
		if err != nil {
			t.Fatalf("err: %v", err)
		}
		wantPage, more := d.m.page(after, limit)
		if got := next != ""; got != more {
			t.Fatalf("Page(%q, %d): a next cursor is %v, the model says %v", after, limit, got, more)
		}
		if limit > 0 {
			if got := len(page); got > limit {
				t.Fatalf("len(page) = %v, want <= %v", got, limit)
			}
		}
		got, want = append(got, page...), append(want, wantPage...)
		if next == "" {
			break
		}
		cursor, after = next, wantPage[len(wantPage)-1].name
	}
	d.requireList(t, want, got, "Page walk")
}

// pageStep takes one page of a walk that other actions interleave with, so
// that cursors resume across changes as the Page doc promises.
func (d *duo) pageStep(t rapid.TB, limit int) {
	page, next, err := d.r.Page(d.cursor, limit)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	want, more := d.m.page(d.after, limit)
	d.requireList(t, want, page, "Page step after "+d.after)
	if got := next != ""; got != more {
		t.Fatalf("Page step after %q: a next cursor is %v, the model says %v", d.after, got, more)
	}
	d.cursor, d.after = next, ""
	if more {
		d.after = want[len(want)-1].name
	}
}

func (d *duo) badCursor(t rapid.TB, cursor string) {
	// A refused cursor changes nothing: Page reads it before listing.
	page, next, err := d.r.Page(cursor, 1)
	if !errors.Is(err, shardreg.ErrInvalidCursor) {
		t.Fatalf("cursor %q: err = %v, want %v", cursor, err, shardreg.ErrInvalidCursor)
	}
	if page != nil {
		t.Fatalf("page = %v, want nil", page)
	}
	if len(next) != 0 {
		t.Fatalf("next = %q, want empty", next)
	}
}

func (d *duo) prune(t rapid.TB) {
	if got, want := d.r.Prune(), d.m.prune(); got != want {
		t.Fatalf("Prune: d.r.Prune() = %v, want %v", got, want)
	}
}

func (d *duo) len(t rapid.TB) {
	if got, want := d.r.Len(), d.m.len(); got != want {
		t.Fatalf("Len: d.r.Len() = %v, want %v", got, want)
	}
}

// check compares what a quiet registry holds with the model, and Version
// with the model's count of visible changes.
func (d *duo) check(t rapid.TB) {
	n := d.m.len()
	if got := d.r.Count(); got != int64(n) {
		t.Fatalf("the cap counter: d.r.Count() = %v, want %v", got, int64(n))
	}
	if got := d.r.Entries(); got != n {
		t.Fatalf("the map: d.r.Entries() = %v, want %v", got, n)
	}
	if n > d.m.cap {
		t.Fatalf("n = %v, want <= %v", n, d.m.cap)
	}
	v := d.r.Version()
	if d.m.changes != d.changes {
		if v <= d.version {
			t.Fatalf("a visible change must move Version: v = %v, want > %v", v, d.version)
		}
	} else {
		if v != d.version {
			t.Fatalf("Version moved without a visible change: v = %v, want %v", v, d.version)
		}
	}
	d.version, d.changes = v, d.m.changes
}

// modelNames is the name pool: a few valid names so that they collide, and
// names that every registry refuses or only a ToolName registry refuses.
var modelNames = []string{"a", "b", "c", "d", "e", "f", "", "\xff", "has space"}

var modelValues = []string{"v0", "v1", "v2"}

// badCursors are cursors Page never makes.
var badCursors = []string{"!!!", "bHIxOg", "eHg6YQ", "lr1:a", "bHIxOv8"}

// modelRounds is how many rapid.Check runs TestModel makes: rapid's default
// of 100 sequences per run is too few to reach the rarer paths (a sweep at
// full cap that frees a slot, a cursor resuming after a reclaimed entry).
func modelRounds() int {
	if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() != "0" {
		return 1 // replaying one seed: every round would be the same
	}
	switch {
	case *long:
		return 500
	case testing.Short():
		return 5
	}
	return 20
}

func TestModel(t *testing.T) {
	for range modelRounds() {
		rapid.Check(t, func(t *rapid.T) {
			d := newDuo(t,
				rapid.IntRange(1, 4).Draw(t, "cap"),
				rapid.Bool().Draw(t, "toolNames"))
			defer d.close()
			d.mint()
			d.mint()
			name := rapid.SampledFrom(modelNames)
			value := rapid.SampledFrom(modelValues)
			limit := rapid.IntRange(-1, 3)
			who := func(t *rapid.T) int { return rapid.IntRange(-1, len(d.toks)-1).Draw(t, "owner") }
			t.Repeat(map[string]func(*rapid.T){
				"": func(t *rapid.T) { d.check(t) },
				"Mint": func(t *rapid.T) {
					if len(d.toks) >= 8 {
						t.Skip("enough owners")
					}
					d.mint()
				},
				"Release": func(t *rapid.T) {
					d.release(rapid.IntRange(0, len(d.toks)-1).Draw(t, "owner"))
				},
				"Register": func(t *rapid.T) {
					d.register(t, kindRegister, name.Draw(t, "name"), value.Draw(t, "value"), who(t))
				},
				"RegisterReady": func(t *rapid.T) {
					d.register(t, kindRegisterReady, name.Draw(t, "name"), value.Draw(t, "value"), who(t))
				},
				"Overwrite": func(t *rapid.T) {
					d.register(t, kindOverwrite, name.Draw(t, "name"), value.Draw(t, "value"), who(t))
				},
				"MarkReady": func(t *rapid.T) { d.markReady(t, name.Draw(t, "name"), who(t)) },
				"Resolve":   func(t *rapid.T) { d.resolve(t, name.Draw(t, "name")) },
				"UnregisterOwned": func(t *rapid.T) {
					d.unregisterOwned(t, name.Draw(t, "name"), who(t))
				},
				"ListReady": func(t *rapid.T) { d.listReady(t) },
				"PageWalk":  func(t *rapid.T) { d.walk(t, limit.Draw(t, "limit")) },
				"PageStep":  func(t *rapid.T) { d.pageStep(t, limit.Draw(t, "limit")) },
				"BadCursor": func(t *rapid.T) { d.badCursor(t, rapid.SampledFrom(badCursors).Draw(t, "cursor")) },
				"Validate":  func(t *rapid.T) { d.validate(t, name.Draw(t, "name")) },
				"Prune":     func(t *rapid.T) { d.prune(t) },
				"Len":       func(t *rapid.T) { d.len(t) },
			})
		})
	}
}

// The model is only evidence if it disagrees with a registry that breaks
// the documented rules. These scripted runs pin the rules the model must
// hold the implementation to, so that a model edited into agreement with
// a bug fails here first.
func TestModelPinsTheRules(t *testing.T) {
	m := newRefModel(2, false)
	a, b := m.mint(), m.mint()
	if err := m.register("x", "1", a, false, false); err != nil {
		t.Fatalf(`m.register("x", "1", a, false, false): %v`, err)
	}
	if err := m.register("x", "2", b, false, false); !errors.Is(err, shardreg.ErrDuplicate) {
		t.Errorf(`m.register("x", "2", b, false, false) = %v, want %v`, err, shardreg.ErrDuplicate)
	}
	if m.markReady("x", b) {
		t.Error(`m.markReady("x", b) = true, want false`)
	}
	if !m.markReady("x", a) {
		t.Error(`m.markReady("x", a) = false, want true`)
	}
	m.release(a)
	if got := m.len(); got != 1 {
		t.Errorf("a death reclaims nothing by itself: m.len() = %v, want 1", got)
	}
	if m.unregisterOwned("x", b) {
		t.Error(`only the owner unregisters: m.unregisterOwned("x", b) = true, want false`)
	}
	if err := m.register("y", "3", b, true, false); err != nil {
		t.Fatalf(`m.register("y", "3", b, true, false): %v`, err)
	}
	m.release(b)
	c := m.mint()
	if err := m.register("z", "4", c, false, false); err != nil {
		t.Fatalf("a full register sweeps the dead: %v", err)
	}
	if got := m.len(); got != 1 {
		t.Errorf("the sweep took every dead entry, not just one: m.len() = %v, want 1", got)
	}
	if err := m.register("w", "5", -1, false, false); !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Errorf(`m.register("w", "5", -1, false, false) = %v, want %v`, err, shardreg.ErrDeadOwner)
	}
	if err := m.register("", "5", -1, false, false); !errors.Is(err, shardreg.ErrInvalidName) {
		t.Errorf(`m.register("", "5", -1, false, false) = %v, want %v`, err, shardreg.ErrInvalidName)
	}
	if err := m.register("w", "5", c, false, false); err != nil {
		t.Fatalf(`m.register("w", "5", c, false, false): %v`, err)
	}
	if err := m.register("v", "6", c, false, false); !errors.Is(err, shardreg.ErrCapReached) {
		t.Errorf(`m.register("v", "6", c, false, false) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	d := m.mint()
	if err := m.register("w", "7", d, true, true); err != nil {
		t.Fatalf("Overwrite displaces a live owner: %v", err)
	}
	if got := m.listReady(); !slices.Equal(got, []refItem{{name: "w", value: "7", owner: d}}) {
		t.Errorf("m.listReady() = %v, want %v", got, []refItem{{name: "w", value: "7", owner: d}})
	}
	if !m.unregisterOwned("z", c) {
		t.Error(`m.unregisterOwned("z", c) = false, want true`)
	}
	m.release(c)
	if m.markReady("w", c) {
		t.Error(`m.markReady("w", c) = true, want false`)
	}
	if !m.unregisterOwned("w", d) {
		t.Error(`m.unregisterOwned("w", d) = false, want true`)
	}
	if got := m.len(); got != 0 {
		t.Errorf("m.len() = %v, want 0", got)
	}
}
