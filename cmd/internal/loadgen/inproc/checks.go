package inproc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// bodyChecker checks invariant 1 from inside every route body: the body
// knows its owner's record, and the call's arguments carry the clock
// reading taken when the call began.
type bodyChecker struct{ t *tally }

func (c bodyChecker) bodyRan(rec *record, a callArgs) {
	// Invariant 8 holds for every body, whenever its call began: Stop
	// returns nil only once no body runs and none can start.
	c.t.Check(InvBodyAfterStop, 1)
	if rec.stopped.Load() {
		c.t.Violate(InvBodyAfterStop, "body of %s (%s) started after its consumer's Stop had returned", rec.tag, rec.ns.name)
	}
	if a.Seq == 0 {
		return // a call that did not say when it began cannot be judged
	}
	c.t.Check(InvBodyAfterDeath, 1)
	if rec.diedBefore(a.Seq) {
		c.t.Violate(InvBodyAfterDeath,
			"body of %s (%s) ran for a call that began at %d, after the owner was observed dead (%s) at %d",
			rec.tag, rec.ns.name, a.Seq, rec.deathShape(), rec.death.Load())
	}
}

// authChecker checks invariant 3 from inside every route body: a body
// whose plan needs a role must only ever run for a caller that presented
// the valid token, and must see that token's principal.
type authChecker struct{ t *tally }

func (c authChecker) bodyRan(rec *record, a callArgs, pr bindsec.Principal) {
	if rec.public {
		return
	}
	c.t.Check(InvUnauthenticatedBody, 1)
	if a.Cred != credValid.String() || pr.Subject() != subjectValid || !pr.HasRole(roleCall) {
		c.t.Violate(InvUnauthenticatedBody,
			"body of %s (%s, plan needs role %q) ran for a call with credential %q, principal %q roles %v",
			rec.tag, rec.ns.name, roleCall, a.Cred, pr.Subject(), slices.Collect(pr.Roles()))
	}
}

// deadEntryChecker checks invariant 5 on listings and on calls.
type deadEntryChecker struct {
	t      *tally
	lookup func(id uint64) *record
}

// listedEntry is one route of a listing: its name (a template's URI
// template) and its title, the owner's tag.
type listedEntry struct{ Name, Title string }

// listed checks a tool listing that began at clock reading begin.
func (c deadEntryChecker) listed(begin uint64, tools []catalog.Tool) (unchecked int) {
	entries := make([]listedEntry, len(tools))
	for i, t := range tools {
		entries[i] = listedEntry{t.Name, t.Title}
	}
	return c.listedEntries(begin, entries)
}

// listedEntries checks a listing of any kind that began at begin.
func (c deadEntryChecker) listedEntries(begin uint64, entries []listedEntry) (unchecked int) {
	for _, tool := range entries {
		id, ok := parseTag(tool.Title)
		var rec *record
		if ok {
			rec = c.lookup(id)
		}
		if rec == nil {
			unchecked++
			continue
		}
		c.t.Check(InvDeadEntryReturned, 1)
		if rec.diedBefore(begin) {
			c.t.Violate(InvDeadEntryReturned,
				"a listing that began at %d contains %s (%s), whose owner was observed dead (%s) at %d",
				begin, tool.Name, rec.tag, rec.deathShape(), rec.death.Load())
		}
	}
	return unchecked
}

// callSnapshot is what a call read about its name before it began.
type callSnapshot struct {
	ns     *nameState
	starts uint64  // ns.starts before the call
	holder *record // ns.holder before the call
	begin  uint64  // the clock when the call began
}

// callEnded checks a finished call. When no start on the name was in
// flight or began during the call, the only entry the call could resolve
// is the holder's (earlier holders' entries were removed or replaced before
// the holder's start succeeded). If the holder was observed dead before the
// call began, the right answer is ErrNotFound; ErrRouteGone or a
// success means resolve returned the dead entry.
func (c deadEntryChecker) callEnded(s callSnapshot, o outcome) {
	if s.starts&countMask != 0 || s.ns.starts.Load() != s.starts {
		return
	}
	if s.holder != nil && !s.holder.diedBefore(s.begin) {
		return
	}
	c.t.Check(InvDeadEntryReturned, 1)
	if o != outcomeGone && o != outcomeOK {
		return
	}
	who := "no consumer ever held it"
	if s.holder != nil {
		who = fmt.Sprintf("its only possible owner %s was observed dead (%s) at %d", s.holder.tag, s.holder.deathShape(), s.holder.death.Load())
	}
	c.t.Violate(InvDeadEntryReturned, "a call to %s that began at %d got %s, but %s: resolve returned a dead entry",
		s.ns.name, s.begin, o, who)
}

// oneWinner checks invariant 9 on a finished call: when the call's name had
// a live holder throughout and no start on the name overlapped the call,
// a successful call must have run that holder's body, which answers with
// its tag, and no other consumer's.
func (c deadEntryChecker) oneWinner(s callSnapshot, o outcome, tag string) {
	if o != outcomeOK || s.holder == nil || s.starts&countMask != 0 || s.ns.starts.Load() != s.starts {
		return
	}
	if s.holder.death.Load() != 0 {
		return // the holder died during the call: invariants 1 and 5 judge it
	}
	c.t.Check(InvOneWinner, 1)
	if tag != s.holder.tag {
		c.t.Violate(InvOneWinner, "a call to %s that began at %d, while %s held it and lived, ran the body of %q",
			s.ns.name, s.begin, s.holder.tag, tag)
	}
}

// startSnapshot is what a start read about its name and the catalog's
// potential holders when it began.
type startSnapshot struct {
	ns        *nameState
	starts    uint64  // ns.starts right after this start counted itself
	holder    *record // ns.holder then
	begin     uint64  // the clock then
	potential uint64  // world.potential right after this start counted itself
}

// dupChecker checks invariant 6 when a start is refused as a duplicate.
type dupChecker struct{ t *tally }

// isolated reports whether no other start on the name was in flight when s
// began or began before it ended: then nothing but the holder's entry can
// have been under the name.
func (s startSnapshot) isolated() bool {
	return s.starts&countMask == 1 && s.ns.starts.Load()>>32 == s.starts>>32
}

// started is called for every start with the error it got.
func (c dupChecker) started(s startSnapshot, err error) {
	if !s.isolated() || (s.holder != nil && !s.holder.diedBefore(s.begin)) {
		return
	}
	c.t.Check(InvDuplicateWithDeadIncumbent, 1)
	if !errors.Is(err, catalog.ErrDuplicate) {
		return
	}
	who := "no consumer had ever held the name"
	if s.holder != nil {
		who = fmt.Sprintf("its incumbent %s was observed dead (%s) at %d", s.holder.tag, s.holder.deathShape(), s.holder.death.Load())
	}
	c.t.Violate(InvDuplicateWithDeadIncumbent, "a start on %s that began at %d was refused as a duplicate, but %s and no other start overlapped it",
		s.ns.name, s.begin, who)
}

// Potential holders are counted in one word, begun<<32 | potential:
// "potential" counts starts begun and neither failed nor observed dead,
// an upper bound on the live entries the catalog can hold.
const (
	potBegun  = countBegun
	potOneIn  = countOneIn
	potOneOut = countOneOut
)

// capChecker checks invariant 4.
type capChecker struct {
	t    *tally
	cap  int
	kind kind
}

// counts returns the slots and the listed routes of c's kind.
func (c capChecker) counts(st catalog.Stats) (slots, listed int) {
	switch c.kind {
	case kindPrompt:
		return st.PromptSlots, st.Prompts
	case kindTemplate:
		return st.TemplateSlots, st.Templates
	case kindResource:
		return st.ResourceSlots, st.Resources
	}
	return st.ToolSlots, st.Tools
}

// sample checks one reading of the catalog's counts.
func (c capChecker) sample(st catalog.Stats) {
	c.t.Check(InvCapCounter, 1)
	slots, listed := c.counts(st)
	if slots > c.cap {
		c.t.Violate(InvCapCounter, "the catalog holds %d %s slots, above its cap of %d", slots, c.kind, c.cap)
	}
	if slots < 0 || listed < 0 {
		c.t.Violate(InvCapCounter, "the catalog reports negative %s counts: %d slots, %d listed", c.kind, slots, listed)
	}
}

// refused checks a start refused with ErrCapReached. At any instant while
// it ran, the entries that could hold a slot belong to starts counted in
// potential when it began (less itself) or begun since: any other entry's
// owner was observed dead before the start began, and the catalog must
// sweep such entries before it refuses.
func (c capChecker) refused(s startSnapshot, potentialNow uint64) {
	c.t.Check(InvCapCounter, 1)
	upper := int64(s.potential&countMask) - 1 + int64(potentialNow>>32-s.potential>>32)
	if upper < int64(c.cap) {
		c.t.Violate(InvCapCounter, "a start on %s was refused at its cap of %d while at most %d consumers could hold an entry: dead entries kept their slots",
			s.ns.name, c.cap, upper)
	}
}

// quiet waits, up to timeout, for the catalog to hold exactly live slots
// and list exactly live tools, once no start is in flight and every death
// has been observed. A dead owner's entry may take a moment to be
// reclaimed, hence the wait; a count that never settles is a violation.
func (c capChecker) quiet(ctx context.Context, sys System, live int, timeout time.Duration, when string) {
	c.t.Check(InvCapCounter, 1)
	deadline := time.Now().Add(timeout)
	var slots, listed int
	for {
		slots, listed = c.counts(sys.Stats())
		if slots == live && listed == live {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Violate(InvCapCounter, "%s: the catalog holds %d %s slots and lists %d, want %d (live consumers) for %v",
		when, slots, c.kind, listed, live, timeout)
}

// lateStopChecker checks invariant 2: after a dead consumer's late Stop,
// its name's live successor still resolves, is listed, and its plan is
// enforced.
type lateStopChecker struct {
	t      *tally
	tick   func() uint64
	invoke func(ctx context.Context, ns *nameState, a callArgs, cred credClass) (string, error)
	list   func(k kind) []listedEntry
}

// check probes the successor succ, whose consumer the caller holds and is
// not ending, with a non-public plan. It reports false when the successor
// died during the probe, which makes the probe inconclusive.
func (c lateStopChecker) check(ctx context.Context, succ *held) bool {
	rec := succ.rec
	var problems []string

	nonce := c.tick()
	text, err := c.invoke(ctx, rec.ns, callArgs{Seq: nonce, Cred: credValid.String(), Probe: nonce}, credValid)
	switch {
	case errors.Is(err, catalog.ErrOverloaded):
		return false // a queue that stays full proves nothing either way
	case err != nil:
		problems = append(problems, fmt.Sprintf("a valid call failed: %v", err))
	case text != rec.tag || rec.probe.Load() != nonce:
		problems = append(problems, fmt.Sprintf("a valid call was answered by %q, not by the successor's body", text))
	}

	listed := false
	for _, tool := range c.list(rec.ns.kind) {
		if tool.Title == rec.tag {
			listed = true
		}
	}
	if !listed {
		problems = append(problems, "it is not listed")
	}

	if !rec.public {
		seq := c.tick()
		_, err = c.invoke(ctx, rec.ns, callArgs{Seq: seq, Cred: credNone.String()}, credNone)
		switch {
		case errors.Is(err, catalog.ErrOverloaded):
			return false
		case err == nil:
			problems = append(problems, "a call without credentials was admitted: its plan is gone")
		case !catalog.Denied(err):
			problems = append(problems, fmt.Sprintf("a call without credentials got %v, want a denial by its plan", err))
		}
	}

	if !rec.alive() || ctx.Err() != nil {
		return false
	}
	c.t.Check(InvLateStopRemovedSuccessor, 1)
	if len(problems) > 0 {
		c.t.Violate(InvLateStopRemovedSuccessor, "after the late stop of a dead consumer of %s, its live successor %s: %s",
			rec.ns.name, rec.tag, strings.Join(problems, "; "))
	}
	return true
}

// overloadPatience is how long invokeRetry keeps retrying a full queue.
const overloadPatience = 2 * time.Second

// startWon checks invariant 9 at a start: rec's start on ns succeeded, and
// no other consumer whose start on the name succeeded may still be a
// winner. Checked after both starts returned: another winner whose owner is
// alive now, and whose Stop has not begun, was alive with its entry in
// place throughout rec's start (deaths are permanent, and only its own Stop
// removes a live owner's entry), so rec's start must have been refused as a
// duplicate. Exact, whatever the interleaving of the two starts.
func (c deadEntryChecker) startWon(ns *nameState, rec *record) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	c.t.Check(InvOneWinner, 1)
	kept := ns.winners[:0]
	for _, other := range ns.winners {
		if other.stopping.Load() || !other.alive() {
			continue // it no longer holds the name, or may not
		}
		c.t.Violate(InvOneWinner, "the start of %s on %s succeeded while %s, whose start had succeeded and which still lives, held the name",
			rec.tag, ns.name, other.tag)
		kept = append(kept, other)
	}
	ns.winners = append(kept, rec)
}

func resultText(r catalog.Result) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}
