package shardreg_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/livereg/livereg/owner"
	"github.com/livereg/livereg/shardreg"
	"pgregory.net/rapid"
)

// fuzzNames adds to the model's pool the names at the length limits, which
// rapid's pool leaves out to keep its failure logs readable.
var fuzzNames = append(slices.Clone(modelNames),
	strings.Repeat("n", shardreg.MaxNameLen),
	strings.Repeat("n", shardreg.MaxNameLen+1),
)

// Fuzz operations, one per byte pair.
const (
	fzRegister = iota
	fzRegisterReady
	fzOverwrite
	fzMarkReady
	fzResolve
	fzUnregister
	fzList
	fzWalk
	fzPageStep
	fzPrune
	fzLen
	fzRelease
	fzMint
	fzValidate
	fzOps
)

// FuzzOperations decodes an operation sequence from the input and runs it on
// one goroutine. The first byte picks the cap and the validator; then each
// byte pair is one operation: the first byte picks the operation and the
// name, the second the owner and the value (or the page size). After every
// step the registry must keep its invariants, and every result must match
// the model of model_test.go.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0x00})
	f.Add([]byte{0x01, fzRegister, 1, fzMarkReady, 1, fzResolve, 0, fzList, 0})
	// A takeover of a dead owner's name at full cap.
	f.Add([]byte{0x00, fzRegister, 1, fzRelease, 1, fzRegister + fzOps, 2, fzLen, 0})
	// A dead entry under another name gives up its slot.
	f.Add([]byte{0x01, fzRegisterReady, 1, fzRegisterReady + fzOps, 2, fzRelease, 1, fzMint, 0, fzRegister + 2*fzOps, 3, fzList, 0})
	// A late stop of a dead owner after its successor took the name.
	f.Add([]byte{0x02, fzRegister, 1, fzRelease, 1, fzOverwrite, 2, fzUnregister, 1, fzResolve, 0, fzUnregister, 2})
	// A walk with an entry reclaimed between two of its pages.
	f.Add([]byte{0x03, fzRegisterReady, 1, fzRegisterReady + fzOps, 1, fzRegisterReady + 2*fzOps, 2, fzPageStep, 2, fzRelease, 1, fzPageStep, 2, fzWalk, 1})
	// Names the registry refuses, with and without the validator.
	f.Add([]byte{0x10, fzRegister + 6*fzOps, 1, fzRegister + 8*fzOps, 1, fzValidate + 9*fzOps, 0, fzValidate + 10*fzOps, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		capacity := 1 + int(data[0]%4)
		d := newDuo(t, capacity, data[0]&0x10 != 0)
		defer d.close()
		d.mint()
		d.mint()
		for ops := data[1:]; len(ops) >= 2; ops = ops[2:] {
			a, b := int(ops[0]), int(ops[1])
			op, name := a%fzOps, fuzzNames[a/fzOps%len(fuzzNames)]
			o := min(b%9-1, len(d.toks)-1) // -1 is the zero Ref
			value := modelValues[b/9%len(modelValues)]
			limit := b%5 - 1
			switch op {
			case fzRegister:
				d.register(t, kindRegister, name, value, o)
			case fzRegisterReady:
				d.register(t, kindRegisterReady, name, value, o)
			case fzOverwrite:
				d.register(t, kindOverwrite, name, value, o)
			case fzMarkReady:
				d.markReady(t, name, o)
			case fzResolve:
				d.resolve(t, name) // a hit must be ready, live and named name
			case fzUnregister:
				d.unregisterOwned(t, name, o)
			case fzList:
				d.listReady(t) // sorted, ready and live, as the model says
			case fzWalk:
				d.walk(t, limit)
			case fzPageStep:
				d.pageStep(t, limit)
			case fzPrune:
				d.prune(t)
			case fzLen:
				d.len(t)
			case fzRelease:
				if o >= 0 {
					d.release(o)
				}
			case fzMint:
				if len(d.toks) < 8 {
					d.mint()
				}
			case fzValidate:
				d.validate(t, name)
			}
			requireInvariants(t, d.r, capacity)
		}
	})
}

// requireInvariants checks what must hold between any two operations of a
// single goroutine, whatever the operations were.
func requireInvariants(t *testing.T, r *shardreg.Registry[string], capacity int) {
	t.Helper()
	n := r.Len()
	if got := r.Count(); got != int64(n) {
		t.Fatalf("Len and the cap counter: r.Count() = %v, want %v", got, int64(n))
	}
	if got := r.Entries(); got != n {
		t.Fatalf("Len and the map: r.Entries() = %v, want %v", got, n)
	}
	if got := r.Count(); got > int64(capacity) {
		t.Fatalf("the cap counter passed the cap: r.Count() = %v, want <= %v", got, int64(capacity))
	}
}

func requireSortedLive(t rapid.TB, list []shardreg.Entry[string]) {
	for i, e := range list {
		if !e.Ready {
			t.Fatalf("listed a not-ready entry %q: e.Ready = false, want true", e.Name)
		}
		if !e.Owner.Alive() {
			t.Fatalf("listed a dead owner's entry %q: e.Owner.Alive() = false, want true", e.Name)
		}
		if i > 0 {
			if prev := list[i-1].Name; prev >= e.Name {
				t.Fatalf("ListReady is not strictly sorted: %q before %q", prev, e.Name)
			}
		}
	}
}

// FuzzPageCursor feeds arbitrary cursors to Page. A cursor is either
// refused with ErrInvalidCursor and nothing else, or it yields a page that
// is a window of the listing, with a next cursor that resumes right after
// the window.
func FuzzPageCursor(f *testing.F) {
	r := newReg(f, shardreg.WithCap(64))
	for _, name := range []string{"a", "b", "bb", "c", "d", "é", "zz", "\U0001F600"} {
		tok := owner.New()
		f.Cleanup(tok.Release)
		if err := r.RegisterReady(name, "v:"+name, tok.Ref()); err != nil {
			f.Fatalf("r.RegisterReady: %v", err)
		}
	}
	dead := owner.New()
	if err := r.RegisterReady("dead", "", dead.Ref()); err != nil {
		f.Fatalf(`r.RegisterReady("dead", "", dead.Ref()): %v`, err)
	}
	dead.Release()

	cursor := func(last string) string {
		return base64.RawURLEncoding.EncodeToString([]byte("lr1:" + last))
	}
	f.Add("", 0)
	f.Add("", 3)
	f.Add(cursor("b"), 2)
	f.Add(cursor("a0"), 1)    // between two names
	f.Add(cursor("zzz"), 5)   // after the last name
	f.Add(cursor("dead"), 5)  // a reclaimed name
	f.Add(cursor(""), 1)      // no name
	f.Add(cursor("\xff"), 1)  // not UTF-8
	f.Add("lr1:b", 1)         // not encoded
	f.Add("bHIxOmI=", 1)      // padded
	f.Add("!!!", -1)          // not base64url
	f.Add(cursor("x")+"A", 1) // trailing garbage
	f.Add(strings.Repeat("A", 6000), 1)
	f.Add(cursor(strings.Repeat("n", shardreg.MaxNameLen+1)), 1)
	if p, next, err := r.Page("", 2); err == nil && next != "" && len(p) == 2 {
		f.Add(next, 2) // a cursor Page made
	}

	f.Fuzz(func(t *testing.T, cursor string, limit int) {
		page, next, err := r.Page(cursor, limit)
		if err != nil {
			if !errors.Is(err, shardreg.ErrInvalidCursor) {
				t.Fatalf("err = %v, want %v", err, shardreg.ErrInvalidCursor)
			}
			if page != nil {
				t.Fatalf("page = %v, want nil", page)
			}
			if len(next) != 0 {
				t.Fatalf("next = %q, want empty", next)
			}
			return
		}
		list := r.ListReady()
		requireSortedLive(t, list)
		want := limit
		if want <= 0 {
			want = shardreg.DefaultPageSize
		}
		start := len(list)
		if len(page) > 0 {
			start = slices.IndexFunc(list, func(e shardreg.Entry[string]) bool { return e.Name == page[0].Name })
			if start < 0 {
				t.Fatalf("page starts with %q, which is not listed: start = %v, want >= 0", page[0].Name, start)
			}
		}
		end := start + len(page)
		if end > len(list) {
			t.Fatalf("a page of %d from index %d runs past the listing's %d entries", len(page), start, len(list))
		}
		if got, want := entryNames(page), entryNames(list[start:end]); !slices.Equal(got, want) {
			t.Fatalf("a page is a window of the listing: entryNames(page) = %v, want %v", got, want)
		}
		if got := len(page); got != min(want, len(list)-start) {
			t.Fatalf("a page is as long as the limit allows: len(page) = %v, want %v", got, min(want, len(list)-start))
		}
		if cursor == "" {
			if start != 0 {
				t.Fatalf("the empty cursor starts at the beginning: start = %v, want 0", start)
			}
		}
		if end == len(list) {
			if len(next) != 0 {
				t.Fatalf("the last page has no next cursor: next = %q, want empty", next)
			}
			return
		}
		if len(next) == 0 {
			t.Fatal("a page short of the end returned no next cursor")
		}
		rest, _, err := r.Page(next, 1)
		if err != nil {
			t.Fatalf("a cursor Page made must be accepted: err: %v", err)
		}
		if got := len(rest); got != 1 {
			t.Fatalf("len(rest) = %d, want 1", got)
		}
		if got := rest[0].Name; got != list[end].Name {
			t.Fatalf("the next cursor resumes right after the page: rest[0].Name = %q, want %q", got, list[end].Name)
		}
	})
}
