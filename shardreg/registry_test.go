package shardreg_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newReg(t testing.TB, opts ...shardreg.Option) *shardreg.Registry[string] {
	t.Helper()
	r, err := shardreg.New[string](opts...)
	require.NoError(t, err)
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
	require.NoError(t, r.Register(name, "v:"+name, tok.Ref()))
	require.True(t, r.MarkReady(name, tok.Ref()))
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
	require.NoError(t, r.Register("tool", "b", b.Ref()), "a dead owner's entry must not block a restart")
	require.True(t, r.MarkReady("tool", b.Ref()))
	e, ok := r.Resolve("tool")
	require.True(t, ok)
	assert.Equal(t, "b", e.Value)
	assert.True(t, e.Owner.Same(b.Ref()))
	assert.Equal(t, 1, r.Len(), "a takeover replaces in place")
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
		assert.ErrorIs(t, err, shardreg.ErrDuplicate, who.name)
		assert.Contains(t, err.Error(), `"tool"`, "the error names the route")
	}
	e, ok := r.Resolve("tool")
	require.True(t, ok)
	assert.Equal(t, "v:tool", e.Value, "the incumbent is untouched")
	assert.Equal(t, v0, r.Version(), "a rejected register changes nothing")
}

// ADR: "A late stop of a dead owner cannot delete a replacement's entry."
func TestLateStopKeepsReplacement(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	b := live(t)
	start(t, r, "tool", b)

	assert.False(t, r.UnregisterOwned("tool", a.Ref()), "A's late stop")
	e, ok := r.Resolve("tool")
	require.True(t, ok)
	assert.True(t, e.Owner.Same(b.Ref()))

	assert.True(t, r.UnregisterOwned("tool", b.Ref()), "B's own stop")
	_, ok = r.Resolve("tool")
	assert.False(t, ok)
	assert.Equal(t, 0, r.Len())
}

func TestUnregisterOwnedByDeadOwnerRemovesItsOwnEntry(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	assert.True(t, r.UnregisterOwned("tool", a.Ref()), "a late stop still cleans up its own entry")
	assert.Equal(t, 0, r.Len())
	assert.False(t, r.UnregisterOwned("tool", a.Ref()), "a second stop removes nothing")
	assert.False(t, r.UnregisterOwned("missing", a.Ref()))
}

// ADR consequence: a takeover at full cap uses no extra slot.
func TestTakeoverAtFullCapUsesNoSlot(t *testing.T) {
	r := newReg(t, shardreg.WithCap(3))
	dead := owner.New()
	start(t, r, "a", dead)
	start(t, r, "b", live(t))
	start(t, r, "c", live(t))
	dead.Release()

	require.NoError(t, r.Register("a", "new", live(t).Ref()))
	assert.Equal(t, 3, r.Len())
	assert.Equal(t, 3, r.Entries())
}

// ADR: "Before cap enforcement, register() prunes every dead-owner entry, so
// a dead entry under any name releases its slot."
func TestDeadEntryUnderAnotherNameReleasesSlot(t *testing.T) {
	r := newReg(t, shardreg.WithCap(2))
	dead := owner.New()
	start(t, r, "old", dead)
	start(t, r, "kept", live(t))
	err := r.Register("new", "x", live(t).Ref())
	require.ErrorIs(t, err, shardreg.ErrCapReached, "full while every owner lives")

	dead.Release()
	require.NoError(t, r.Register("new", "x", live(t).Ref()), "the dead entry's slot is reclaimed")
	assert.Equal(t, 2, r.Len())
	_, ok := r.Resolve("old")
	assert.False(t, ok)
}

func TestCapRejectsWhenAllLive(t *testing.T) {
	r := newReg(t) // default cap 128
	for i := range shardreg.DefaultCap {
		require.NoError(t, r.Register(fmt.Sprintf("t%03d", i), "", live(t).Ref()))
	}
	err := r.Register("one-too-many", "", live(t).Ref())
	assert.ErrorIs(t, err, shardreg.ErrCapReached)
	assert.Equal(t, shardreg.DefaultCap, r.Len())
}

// ADR: "resolve() and list_ready() skip and remove dead-owner entries."
func TestListingHidesDeadAndNotReady(t *testing.T) {
	r := newReg(t)
	start(t, r, "b-ready", live(t))
	start(t, r, "a-ready", live(t))
	require.NoError(t, r.Register("c-starting", "", live(t).Ref()))
	dead := owner.New()
	start(t, r, "d-dead", dead)
	dead.Release()

	assert.Equal(t, []string{"a-ready", "b-ready"}, names(r.ListReady()), "sorted, live and ready only")
	assert.Equal(t, 3, r.Len(), "listing reclaimed the dead entry")
	_, ok := r.Resolve("c-starting")
	assert.False(t, ok, "a starting entry is not resolved")
	_, ok = r.Resolve("d-dead")
	assert.False(t, ok)
}

func TestResolveRemovesDeadEntry(t *testing.T) {
	r := newReg(t)
	a := owner.New()
	start(t, r, "tool", a)
	a.Release()
	v := r.Version()
	_, ok := r.Resolve("tool")
	assert.False(t, ok)
	assert.Equal(t, 0, r.Len())
	assert.Greater(t, r.Version(), v, "a reclaim is a change listings can see")
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
			assert.ErrorIs(t, err, tt.want)
			assert.Equal(t, v, r.Version(), "a failed register changes nothing")
			assert.Equal(t, 1, r.Len())
		})
	}
}

func TestMarkReadyIsOwnerConditional(t *testing.T) {
	r := newReg(t)
	a, b := live(t), live(t)
	require.NoError(t, r.Register("tool", "", a.Ref()))

	assert.False(t, r.MarkReady("tool", b.Ref()), "another owner cannot mark it")
	assert.False(t, r.MarkReady("missing", a.Ref()))
	_, ok := r.Resolve("tool")
	assert.False(t, ok)

	v := r.Version()
	assert.True(t, r.MarkReady("tool", a.Ref()))
	assert.Greater(t, r.Version(), v, "a ready flip is a visible change")
	v = r.Version()
	assert.True(t, r.MarkReady("tool", a.Ref()), "already ready is still true")
	assert.Equal(t, v, r.Version())

	dead := owner.New()
	require.NoError(t, r.Register("other", "", dead.Ref()))
	dead.Release()
	assert.False(t, r.MarkReady("other", dead.Ref()), "a dead owner cannot mark")
}

func TestRegisterReadyAndOverwrite(t *testing.T) {
	r := newReg(t, shardreg.WithCap(2))
	a, b := live(t), live(t)
	require.NoError(t, r.RegisterReady("p", "a", a.Ref()))
	e, ok := r.Resolve("p")
	require.True(t, ok, "RegisterReady entries resolve at once")
	assert.Equal(t, "a", e.Value)

	assert.ErrorIs(t, r.RegisterReady("p", "b", b.Ref()), shardreg.ErrDuplicate)
	require.NoError(t, r.Overwrite("p", "b", b.Ref()), "Overwrite displaces a live incumbent")
	e, _ = r.Resolve("p")
	assert.Equal(t, "b", e.Value)
	assert.True(t, e.Owner.Same(b.Ref()))
	assert.Equal(t, 1, r.Len())

	require.NoError(t, r.Overwrite("q", "b", b.Ref()), "Overwrite of a new name takes a slot")
	assert.ErrorIs(t, r.Overwrite("z", "b", b.Ref()), shardreg.ErrCapReached)
	dead := owner.New()
	dead.Release()
	assert.ErrorIs(t, r.Overwrite("p", "d", dead.Ref()), shardreg.ErrDeadOwner)
	assert.ErrorIs(t, r.Overwrite("", "d", b.Ref()), shardreg.ErrInvalidName)
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
			require.ErrorIs(t, err, shardreg.ErrInvalidName)
			assert.Less(t, len(err.Error()), 300, "a hostile name must not blow up the message")
			assert.Equal(t, v, tt.reg.Version())
			assert.Equal(t, 0, tt.reg.Len())
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
		assert.NoError(t, g.reg.Register(g.key, "", live(t).Ref()), g.key)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, opt := range []shardreg.Option{shardreg.WithCap(0), shardreg.WithCap(-5), shardreg.WithValidator(nil)} {
		r, err := shardreg.New[int](opt)
		assert.ErrorIs(t, err, shardreg.ErrInvalidOption)
		assert.Nil(t, r)
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
	require.Len(t, second, 2)
	assert.Same(t, &first[0], &second[0], "no change: the cached slice is returned")
	allocs := testing.AllocsPerRun(100, func() { _ = r.ListReady() })
	assert.Zero(t, allocs)

	changes := []struct {
		name   string
		change func()
		want   []string
	}{
		{"register", func() { require.NoError(t, r.Register("c", "", c.Ref())) }, []string{"a", "b"}},
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
		assert.Equal(t, ch.want, names(after), ch.name)
		assert.NotSame(t, &before[0], &after[0], "%s: a change must not be served from the cache", ch.name)
	}

	// Owners that hold no listed entry change nothing the listing shows:
	// not one of the registry's owners, nor the owner of a not-ready entry.
	// The cache survives their deaths, checked against the listed owners
	// once, and is then O(1) and free of allocation again.
	pending := owner.New()
	require.NoError(t, r.Register("e", "", pending.Ref()))
	before := r.ListReady()
	owner.New().Release()
	pending.Release()
	after := r.ListReady()
	assert.Same(t, &before[0], &after[0], "deaths of owners with no listed entry: the cached slice is returned")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = r.ListReady() }))
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
		require.NoError(t, err)
		got = append(got, names(page)...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, 3, pages, "default page size 100")
	assert.Len(t, got, 250)
	assert.IsIncreasing(t, got)

	page, next, err := r.Page("", 1000)
	require.NoError(t, err)
	assert.Len(t, page, 250)
	assert.Empty(t, next)

	for _, bad := range []string{"!!!", "bm90LW91cnM", "lr1:tool-001"} {
		_, _, err := r.Page(bad, 10)
		assert.ErrorIs(t, err, shardreg.ErrInvalidCursor, bad)
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
	require.NoError(t, err)
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
		require.NoError(t, err)
		seen = append(seen, names(page)...)
	}
	count := map[string]int{}
	for _, n := range seen {
		count[n]++
	}
	for i := 0; i < 100; i += 2 {
		assert.Equal(t, 1, count[fmt.Sprintf("s-%03d", i)], "stable entry s-%03d", i)
	}
	for n, c := range count {
		assert.Equal(t, 1, c, "no duplicates: %s", n)
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
	assert.Equal(t, len(dead), r.Prune())
	assert.Equal(t, 10-len(dead), r.Len())
	assert.Equal(t, 0, r.Prune())
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
		require.Equal(t, int32(1), wins.Load(), "round %d", round)
		require.Equal(t, int32(racers-1), dups.Load())
		require.Equal(t, 1, r.Len())
	}
}

func TestLookup(t *testing.T) {
	r := newReg(t)
	a := live(t)
	require.NoError(t, r.Register("tool", "v", a.Ref()))
	_, _, ok := r.Lookup("tool")
	assert.False(t, ok, "not ready")
	require.True(t, r.MarkReady("tool", a.Ref()))
	v, o, ok := r.Lookup("tool")
	require.True(t, ok)
	assert.Equal(t, "v", v)
	assert.True(t, o.Same(a.Ref()))
	_, _, ok = r.Lookup("missing")
	assert.False(t, ok)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _, _ = r.Lookup("tool") }))

	d := owner.New()
	start(t, r, "dead", d)
	d.Release()
	_, _, ok = r.Lookup("dead")
	assert.False(t, ok)
	assert.Equal(t, 1, r.Len(), "Lookup reclaims the dead entry it meets")
}
