package shardreg_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newReg(t testing.TB, opts ...shardreg.Option) *shardreg.Registry[string] {
	t.Helper()
	r, err := shardreg.New[string](opts...)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	return r
}

// live mints a token that the test releases when it ends.
func live(t testing.TB) *owner.Token {
	tok := owner.New()
	t.Cleanup(tok.Release)
	return tok
}

// start registers and marks ready, as a consumer start does.
func start(t testing.TB, r *shardreg.Registry[string], name string, tok *owner.Token) {
	t.Helper()
	if err := r.Register(name, "v:"+name, tok.Ref()); err != nil {
		t.Fatalf(`r.Register(name, "v:"+name, tok.Ref()): %v`, err)
	}
	if !r.MarkReady(name, tok.Ref()) {
		t.Fatal("r.MarkReady(name, tok.Ref()) = false, want true")
	}
}

func names(es []shardreg.Entry[string]) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// ADR: "register() replaces a duplicate entry whose owner token is dead."
func TestTakeoverAfterDrop(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release() // A died without a stop

	b := live(t)
	if err := r.Register("tool", "b", b.Ref()); err != nil {
		t.Fatalf("a dead owner's entry must not block a restart: %v", err)
	}
	if !r.MarkReady("tool", b.Ref()) {
		t.Fatal(`r.MarkReady("tool", b.Ref()) = false, want true`)
	}
	e, ok := r.Resolve("tool")
	if !ok {
		t.Fatal(`r.Resolve("tool"): ok = false, want true`)
	}
	if e.Value != "b" {
		t.Errorf(`e.Value = %q, want "b"`, e.Value)
	}
	if !e.Owner.Same(b.Ref()) {
		t.Error("e.Owner.Same(b.Ref()) = false, want true")
	}
	if got := r.Len(); got != 1 {
		t.Errorf("a takeover replaces in place: r.Len() = %v, want 1", got)
	}
}

// ADR: "A live owner keeps today's rejection."
func TestLiveDuplicateRejected(t *testing.T) {
	r := newReg(t)
	a := live(t)
	start(t, r, "tool", a)
	v0 := r.Version()

	for _, who := range []struct {
		name string
		ref  owner.Ref
	}{{"another owner", live(t).Ref()}, {"the same owner", a.Ref()}} {
		err := r.Register("tool", "x", who.ref)
		if !errors.Is(err, shardreg.ErrDuplicate) {
			t.Errorf("%s: err = %v, want %v", who.name, err, shardreg.ErrDuplicate)
		}
		if err != nil && !strings.Contains(err.Error(), `"tool"`) {
			t.Errorf("%s: the error %q does not name the route \"tool\"", who.name, err)
		}
	}
	e, ok := r.Resolve("tool")
	if !ok {
		t.Fatal(`r.Resolve("tool"): ok = false, want true`)
	}
	if e.Value != "v:tool" {
		t.Errorf(`the incumbent is untouched: e.Value = %q, want "v:tool"`, e.Value)
	}
	if got := r.Version(); got != v0 {
		t.Errorf("a rejected register changes nothing: r.Version() = %v, want %v", got, v0)
	}
}

// ADR: "A late stop of a dead owner cannot delete a replacement's entry."
func TestLateStopKeepsReplacement(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	b := live(t)
	start(t, r, "tool", b)

	if r.UnregisterOwned("tool", a.Ref()) {
		t.Error(`A's late stop: r.UnregisterOwned("tool", a.Ref()) = true, want false`)
	}
	e, ok := r.Resolve("tool")
	if !ok {
		t.Fatal(`r.Resolve("tool"): ok = false, want true`)
	}
	if !e.Owner.Same(b.Ref()) {
		t.Error("e.Owner.Same(b.Ref()) = false, want true")
	}

	if !r.UnregisterOwned("tool", b.Ref()) {
		t.Error(`B's own stop: r.UnregisterOwned("tool", b.Ref()) = false, want true`)
	}
	_, ok = r.Resolve("tool")
	if ok {
		t.Error(`r.Resolve("tool"): ok = true, want false`)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
}

func TestUnregisterOwnedByDeadOwnerRemovesItsOwnEntry(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	if !r.UnregisterOwned("tool", a.Ref()) {
		t.Error(`a late stop still cleans up its own entry: r.UnregisterOwned("tool", a.Ref()) = false, want true`)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
	if r.UnregisterOwned("tool", a.Ref()) {
		t.Error(`a second stop removes nothing: r.UnregisterOwned("tool", a.Ref()) = true, want false`)
	}
	if r.UnregisterOwned("missing", a.Ref()) {
		t.Error(`r.UnregisterOwned("missing", a.Ref()) = true, want false`)
	}
}

// ADR consequence: a takeover at full cap uses no extra slot.
func TestTakeoverAtFullCapUsesNoSlot(t *testing.T) {
	r := newReg(t, shardreg.WithCap(3))
	dead := owner.New()
	start(t, r, "a", dead)
	start(t, r, "b", live(t))
	start(t, r, "c", live(t))
	dead.Release()

	if err := r.Register("a", "new", live(t).Ref()); err != nil {
		t.Fatalf(`r.Register("a", "new", live(t).Ref()): %v`, err)
	}
	if got := r.Len(); got != 3 {
		t.Errorf("r.Len() = %v, want 3", got)
	}
	if got := r.Entries(); got != 3 {
		t.Errorf("r.Entries() = %v, want 3", got)
	}
}

// ADR: "Before cap enforcement, register() prunes every dead-owner entry, so
// a dead entry under any name releases its slot."
func TestDeadEntryUnderAnotherNameReleasesSlot(t *testing.T) {
	r := newReg(t, shardreg.WithCap(2))
	dead := owner.New()
	start(t, r, "old", dead)
	start(t, r, "kept", live(t))
	err := r.Register("new", "x", live(t).Ref())
	if !errors.Is(err, shardreg.ErrCapReached) {
		t.Fatalf("full while every owner lives: err = %v, want %v", err, shardreg.ErrCapReached)
	}

	dead.Release()
	if err := r.Register("new", "x", live(t).Ref()); err != nil {
		t.Fatalf("the dead entry's slot is reclaimed: %v", err)
	}
	if got := r.Len(); got != 2 {
		t.Errorf("r.Len() = %v, want 2", got)
	}
	_, ok := r.Resolve("old")
	if ok {
		t.Error(`r.Resolve("old"): ok = true, want false`)
	}
}

func TestCapRejectsWhenAllLive(t *testing.T) {
	r := newReg(t) // default cap 128
	for i := range shardreg.DefaultCap {
		if err := r.Register(fmt.Sprintf("t%03d", i), "", live(t).Ref()); err != nil {
			t.Fatalf("r.Register: %v", err)
		}
	}
	err := r.Register("one-too-many", "", live(t).Ref())
	if !errors.Is(err, shardreg.ErrCapReached) {
		t.Errorf("err = %v, want %v", err, shardreg.ErrCapReached)
	}
	if got := r.Len(); got != shardreg.DefaultCap {
		t.Errorf("r.Len() = %v, want %v", got, shardreg.DefaultCap)
	}
}

// ADR: "resolve() and list_ready() skip and remove dead-owner entries."
func TestListingHidesDeadAndNotReady(t *testing.T) {
	r := newReg(t)
	start(t, r, "b-ready", live(t))
	start(t, r, "a-ready", live(t))
	if err := r.Register("c-starting", "", live(t).Ref()); err != nil {
		t.Fatalf("r.Register: %v", err)
	}
	dead := owner.New()
	start(t, r, "d-dead", dead)
	dead.Release()

	if got := names(r.ListReady()); !slices.Equal(got, []string{"a-ready", "b-ready"}) {
		t.Errorf("sorted, live and ready only: names(r.ListReady()) = %v, want %v", got, []string{"a-ready", "b-ready"})
	}
	if got := r.Len(); got != 3 {
		t.Errorf("listing reclaimed the dead entry: r.Len() = %v, want 3", got)
	}
	_, ok := r.Resolve("c-starting")
	if ok {
		t.Error("a starting entry is not resolved: ok = true, want false")
	}
	_, ok = r.Resolve("d-dead")
	if ok {
		t.Error(`r.Resolve("d-dead"): ok = true, want false`)
	}
}

func TestResolveRemovesDeadEntry(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	v := r.Version()
	_, ok := r.Resolve("tool")
	if ok {
		t.Error(`r.Resolve("tool"): ok = true, want false`)
	}
	if got := r.Len(); got != 0 {
		t.Errorf("r.Len() = %v, want 0", got)
	}
	if got := r.Version(); got <= v {
		t.Errorf("a reclaim is a change listings can see: r.Version() = %v, want > %v", got, v)
	}
}

func TestRegisterChecksInOrder(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1))
	holder := live(t)
	start(t, r, "held", holder)
	dead := owner.New()
	dead.Release()

	tests := []struct {
		name string
		key  string
		ref  owner.Ref
		want error
	}{
		{"bad name beats everything", "", dead.Ref(), shardreg.ErrInvalidName},
		{"dead owner beats duplicate", "held", dead.Ref(), shardreg.ErrDeadOwner},
		{"zero Ref is dead", "held", owner.Ref{}, shardreg.ErrDeadOwner},
		{"duplicate beats cap", "held", live(t).Ref(), shardreg.ErrDuplicate},
		{"cap", "other", live(t).Ref(), shardreg.ErrCapReached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := r.Version()
			err := r.Register(tt.key, "x", tt.ref)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if got := r.Version(); got != v {
				t.Errorf("a failed register changes nothing: r.Version() = %v, want %v", got, v)
			}
			if got := r.Len(); got != 1 {
				t.Errorf("r.Len() = %v, want 1", got)
			}
		})
	}
}

func TestMarkReadyIsOwnerConditional(t *testing.T) {
	r := newReg(t)
	a, b := live(t), live(t)
	if err := r.Register("tool", "", a.Ref()); err != nil {
		t.Fatalf(`r.Register("tool", "", a.Ref()): %v`, err)
	}

	if r.MarkReady("tool", b.Ref()) {
		t.Error(`another owner cannot mark it: r.MarkReady("tool", b.Ref()) = true, want false`)
	}
	if r.MarkReady("missing", a.Ref()) {
		t.Error(`r.MarkReady("missing", a.Ref()) = true, want false`)
	}
	_, ok := r.Resolve("tool")
	if ok {
		t.Error(`r.Resolve("tool"): ok = true, want false`)
	}

	v := r.Version()
	if !r.MarkReady("tool", a.Ref()) {
		t.Error(`r.MarkReady("tool", a.Ref()) = false, want true`)
	}
	if got := r.Version(); got <= v {
		t.Errorf("a ready flip is a visible change: r.Version() = %v, want > %v", got, v)
	}
	v = r.Version()
	if !r.MarkReady("tool", a.Ref()) {
		t.Error(`already ready is still true: r.MarkReady("tool", a.Ref()) = false, want true`)
	}
	if got := r.Version(); got != v {
		t.Errorf("r.Version() = %v, want %v", got, v)
	}

	dead := owner.New()
	if err := r.Register("other", "", dead.Ref()); err != nil {
		t.Fatalf(`r.Register("other", "", dead.Ref()): %v`, err)
	}
	dead.Release()
	if r.MarkReady("other", dead.Ref()) {
		t.Error(`a dead owner cannot mark: r.MarkReady("other", dead.Ref()) = true, want false`)
	}
}

func TestRegisterReadyAndOverwrite(t *testing.T) {
	r := newReg(t, shardreg.WithCap(2))
	a, b := live(t), live(t)
	if err := r.RegisterReady("p", "a", a.Ref()); err != nil {
		t.Fatalf(`r.RegisterReady("p", "a", a.Ref()): %v`, err)
	}
	e, ok := r.Resolve("p")
	if !ok {
		t.Fatal("RegisterReady entries resolve at once: ok = false, want true")
	}
	if e.Value != "a" {
		t.Errorf(`e.Value = %q, want "a"`, e.Value)
	}

	if err := r.RegisterReady("p", "b", b.Ref()); !errors.Is(err, shardreg.ErrDuplicate) {
		t.Errorf(`r.RegisterReady("p", "b", b.Ref()) = %v, want %v`, err, shardreg.ErrDuplicate)
	}
	if err := r.Overwrite("p", "b", b.Ref()); err != nil {
		t.Fatalf("Overwrite displaces a live incumbent: %v", err)
	}
	e, _ = r.Resolve("p")
	if e.Value != "b" {
		t.Errorf(`e.Value = %q, want "b"`, e.Value)
	}
	if !e.Owner.Same(b.Ref()) {
		t.Error("e.Owner.Same(b.Ref()) = false, want true")
	}
	if got := r.Len(); got != 1 {
		t.Errorf("r.Len() = %v, want 1", got)
	}

	if err := r.Overwrite("q", "b", b.Ref()); err != nil {
		t.Fatalf("Overwrite of a new name takes a slot: %v", err)
	}
	if err := r.Overwrite("z", "b", b.Ref()); !errors.Is(err, shardreg.ErrCapReached) {
		t.Errorf(`r.Overwrite("z", "b", b.Ref()) = %v, want %v`, err, shardreg.ErrCapReached)
	}
	dead := owner.New()
	dead.Release()
	if err := r.Overwrite("p", "d", dead.Ref()); !errors.Is(err, shardreg.ErrDeadOwner) {
		t.Errorf(`r.Overwrite("p", "d", dead.Ref()) = %v, want %v`, err, shardreg.ErrDeadOwner)
	}
	if err := r.Overwrite("", "d", b.Ref()); !errors.Is(err, shardreg.ErrInvalidName) {
		t.Errorf(`r.Overwrite("", "d", b.Ref()) = %v, want %v`, err, shardreg.ErrInvalidName)
	}
}

func TestBadNames(t *testing.T) {
	tool := newReg(t, shardreg.WithValidator(shardreg.ToolName))
	res := newReg(t, shardreg.WithValidator(shardreg.ResourceURI))
	plain := newReg(t)
	tests := []struct {
		name string
		reg  *shardreg.Registry[string]
		key  string
	}{
		{"empty", plain, ""},
		{"invalid UTF-8", plain, "tool\xff"},
		{"too long", plain, strings.Repeat("a", shardreg.MaxNameLen+1)},
		{"tool: space", tool, "my tool"},
		{"tool: slash", tool, "a/b"},
		{"tool: too long", tool, strings.Repeat("a", 129)},
		{"tool: non-ASCII", tool, "outil-é"},
		{"resource: relative", res, "docs/readme.md"},
		{"resource: unparsable", res, "http://[::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.reg.Version()
			err := tt.reg.Register(tt.key, "", live(t).Ref())
			if !errors.Is(err, shardreg.ErrInvalidName) {
				t.Fatalf("err = %v, want %v", err, shardreg.ErrInvalidName)
			}
			if got := len(err.Error()); got >= 300 {
				t.Errorf("a hostile name must not blow up the message: len(err.Error()) = %v, want < 300", got)
			}
			if got := tt.reg.Version(); got != v {
				t.Errorf("tt.reg.Version() = %v, want %v", got, v)
			}
			if got := tt.reg.Len(); got != 0 {
				t.Errorf("tt.reg.Len() = %v, want 0", got)
			}
		})
	}
	good := []struct {
		reg *shardreg.Registry[string]
		key string
	}{
		{plain, strings.Repeat("a", shardreg.MaxNameLen)},
		{tool, "mcp.tool_name-000123"},
		{tool, strings.Repeat("a", 128)},
		{res, "test://static-text"},
		{res, "file:///etc/hosts"},
	}
	for _, g := range good {
		if err := g.reg.Register(g.key, "", live(t).Ref()); err != nil {
			t.Errorf("%s: %v", g.key, err)
		}
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, opt := range []shardreg.Option{shardreg.WithCap(0), shardreg.WithCap(-5), shardreg.WithValidator(nil)} {
		r, err := shardreg.New[int](opt)
		if !errors.Is(err, shardreg.ErrInvalidOption) {
			t.Errorf("New with a bad option: err = %v, want %v", err, shardreg.ErrInvalidOption)
		}
		if r != nil {
			t.Errorf("New with a bad option returned a registry %p, want nil", r)
		}
	}
}

func TestListReadyCachedUntilChange(t *testing.T) {
	r := newReg(t)
	a := live(t)
	start(t, r, "a", a)
	start(t, r, "b", live(t))

	c := live(t)
	first := r.ListReady()
	second := r.ListReady()
	if got := len(second); got != 2 {
		t.Fatalf("len(second) = %d, want 2", got)
	}
	if &second[0] != &first[0] {
		t.Errorf("no change: the cached slice is returned: &second[0] = %p, want the same pointer as &first[0] = %p", &second[0], &first[0])
	}
	allocs := testing.AllocsPerRun(100, func() { _ = r.ListReady() })
	if allocs != 0 {
		t.Errorf("allocs = %v, want 0", allocs)
	}

	changes := []struct {
		name   string
		change func()
		want   []string
	}{
		{"register", func() {
			if err := r.Register("c", "", c.Ref()); err != nil {
				t.Fatalf(`r.Register("c", "", c.Ref()): %v`, err)
			}
		}, []string{"a", "b"}},
		{"ready flip", func() { r.MarkReady("c", c.Ref()) }, []string{"a", "b", "c"}},
		{"unregister", func() { r.UnregisterOwned("a", a.Ref()) }, []string{"b", "c"}},
		{"owner death", func() {
			d := owner.New()
			start(t, r, "d", d)
			_ = r.ListReady()
			d.Release()
		}, []string{"b", "c"}},
	}
	for _, ch := range changes {
		before := r.ListReady()
		ch.change()
		after := r.ListReady()
		if got := names(after); !slices.Equal(got, ch.want) {
			t.Errorf("%s: names(after) = %v, want %v", ch.name, got, ch.want)
		}
		if &after[0] == &before[0] {
			t.Errorf("%s: a change must not be served from the cache: &after[0] and &before[0] are the same pointer %p, want distinct", ch.name, &before[0])
		}
	}

	// Owners that hold no listed entry change nothing the listing shows:
	// not one of the registry's owners, nor the owner of a not-ready entry.
	// The cache survives their deaths, checked against the listed owners
	// once, and is then O(1) and free of allocation again.
	pending := owner.New()
	if err := r.Register("e", "", pending.Ref()); err != nil {
		t.Fatalf(`r.Register("e", "", pending.Ref()): %v`, err)
	}
	before := r.ListReady()
	owner.New().Release()
	pending.Release()
	after := r.ListReady()
	if &after[0] != &before[0] {
		t.Errorf("deaths of owners with no listed entry: the cached slice is returned: &after[0] = %p, want the same pointer as &before[0] = %p", &after[0], &before[0])
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = r.ListReady() }); allocs != 0 {
		t.Errorf("ListReady allocates %v times per call, want 0", allocs)
	}
}

func TestPage(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1000))
	for i := range 250 {
		start(t, r, fmt.Sprintf("tool-%03d", i), live(t))
	}
	var got []string
	cursor, pages := "", 0
	for {
		page, next, err := r.Page(cursor, 0)
		if err != nil {
			t.Fatalf("err: %v", err)
		}
		got = append(got, names(page)...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	if pages != 3 {
		t.Errorf("default page size 100: pages = %v, want 3", pages)
	}
	if len(got) != 250 {
		t.Errorf("pages listed %d names, want 250", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Errorf("pages listed %q before %q, want strictly increasing names", got[i-1], got[i])
			break
		}
	}

	page, next, err := r.Page("", 1000)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	if got := len(page); got != 250 {
		t.Errorf("len(page) = %d, want 250", got)
	}
	if len(next) != 0 {
		t.Errorf("next = %q, want empty", next)
	}

	for _, bad := range []string{"!!!", "bm90LW91cnM", "lr1:tool-001"} {
		_, _, err := r.Page(bad, 10)
		if !errors.Is(err, shardreg.ErrInvalidCursor) {
			t.Errorf("%s: err = %v, want %v", bad, err, shardreg.ErrInvalidCursor)
		}
	}
}

// A walk resumes after the last name returned, so entries that stay put for
// the whole walk are returned exactly once, whatever else changes.
func TestPageStableAcrossChanges(t *testing.T) {
	r := newReg(t, shardreg.WithCap(1000))
	for i := 0; i < 100; i += 2 {
		start(t, r, fmt.Sprintf("s-%03d", i), live(t))
	}
	page, next, err := r.Page("", 10)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	seen := names(page)
	churn := 1
	for next != "" {
		// Insert and remove names around the cursor between pages.
		tok := live(t)
		start(t, r, fmt.Sprintf("s-%03d", churn), tok)
		if churn > 2 {
			r.UnregisterOwned(fmt.Sprintf("s-%03d", churn-2), tok.Ref())
		}
		churn += 2
		page, next, err = r.Page(next, 10)
		if err != nil {
			t.Fatalf("err: %v", err)
		}
		seen = append(seen, names(page)...)
	}
	count := map[string]int{}
	for _, n := range seen {
		count[n]++
	}
	for i := 0; i < 100; i += 2 {
		if got := count[fmt.Sprintf("s-%03d", i)]; got != 1 {
			t.Errorf(`stable entry s-%03d: count[fmt.Sprintf("s-%%03d", i)] = %v, want 1`, i, got)
		}
	}
	for n, c := range count {
		if c != 1 {
			t.Errorf("no duplicates: %s: c = %v, want 1", n, c)
		}
	}
}

func TestPruneRemovesOnlyDead(t *testing.T) {
	r := newReg(t)
	var dead []*owner.Token
	for i := range 10 {
		tok := owner.New()
		start(t, r, fmt.Sprintf("t%d", i), tok)
		if i%3 == 0 {
			dead = append(dead, tok)
		} else {
			t.Cleanup(tok.Release)
		}
	}
	for _, d := range dead {
		d.Release()
	}
	if got := r.Prune(); got != len(dead) {
		t.Errorf("r.Prune() = %v, want %v", got, len(dead))
	}
	if got := r.Len(); got != 10-len(dead) {
		t.Errorf("r.Len() = %v, want %v", got, 10-len(dead))
	}
	if got := r.Prune(); got != 0 {
		t.Errorf("r.Prune() = %v, want 0", got)
	}
}

// Many consumers restart one dead name at once: exactly one wins.
func TestConcurrentRestartOneWinner(t *testing.T) {
	for round := range 200 {
		r := newReg(t, shardreg.WithCap(1))
		dead := owner.New()
		start(t, r, "tool", dead)
		dead.Release()

		const racers = 8
		var wins, dups atomic.Int32
		var wg sync.WaitGroup
		barrier := make(chan struct{})
		for range racers {
			wg.Go(func() {
				tok := live(t)
				<-barrier
				err := r.Register("tool", "", tok.Ref())
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, shardreg.ErrDuplicate):
					dups.Add(1)
				default:
					t.Errorf("round %d: unexpected %v", round, err)
				}
			})
		}
		close(barrier)
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("round %d: wins.Load() = %v, want 1", round, got)
		}
		if got, want := dups.Load(), int32(racers-1); got != want {
			t.Fatalf("dups.Load() = %v, want %v", got, want)
		}
		if got := r.Len(); got != 1 {
			t.Fatalf("r.Len() = %v, want 1", got)
		}
	}
}

func TestLookup(t *testing.T) {
	r := newReg(t)
	a := live(t)
	if err := r.Register("tool", "v", a.Ref()); err != nil {
		t.Fatalf(`r.Register("tool", "v", a.Ref()): %v`, err)
	}
	_, _, ok := r.Lookup("tool")
	if ok {
		t.Error("not ready: ok = true, want false")
	}
	if !r.MarkReady("tool", a.Ref()) {
		t.Fatal(`r.MarkReady("tool", a.Ref()) = false, want true`)
	}
	v, o, ok := r.Lookup("tool")
	if !ok {
		t.Fatal(`r.Lookup("tool"): ok = false, want true`)
	}
	if v != "v" {
		t.Errorf(`v = %q, want "v"`, v)
	}
	if !o.Same(a.Ref()) {
		t.Error("o.Same(a.Ref()) = false, want true")
	}
	_, _, ok = r.Lookup("missing")
	if ok {
		t.Error(`r.Lookup("missing"): ok = true, want false`)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = r.Lookup("tool") }); allocs != 0 {
		t.Errorf("Lookup allocates %v times per call, want 0", allocs)
	}

	d := owner.New()
	start(t, r, "dead", d)
	d.Release()
	_, _, ok = r.Lookup("dead")
	if ok {
		t.Error(`r.Lookup("dead"): ok = true, want false`)
	}
	if got := r.Len(); got != 1 {
		t.Errorf("Lookup reclaims the dead entry it meets: r.Len() = %v, want 1", got)
	}
}
