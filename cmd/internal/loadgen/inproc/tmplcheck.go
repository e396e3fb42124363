package inproc

import (
	"strings"

	"github.com/livereg/livereg/catalog"
)

// templateChecker checks invariant 11: a templated read is answered by
// the most specific live template that matches its URI, and the reader
// gets the variables the URI holds under its own template's names.
type templateChecker struct{ t *tally }

// quiet reports whether no start on s's key was in flight when the read
// began or began before it ended: then the holder read then is the only
// owner whose entry the key can have had throughout.
func (s callSnapshot) quiet() bool {
	return s.starts&countMask == 0 && s.ns.starts.Load() == s.starts
}

// readEnded checks a read of an item URI, which the group's specific and
// wide templates both match. It judges only reads during which neither key
// saw a start. Then: if the specific template's holder lived throughout,
// a success must be its answer; if it was observed dead before the read
// began (or never held) and the wide one lived throughout, the read must
// not fail as unknown or gone (the dead template matched, invariant 5) and
// a success must be the wide one's; if both were dead before the read
// began, nothing may answer (invariant 5). "Lived throughout" is read
// after the read ended (record.livedThrough): a death or a Stop noticed
// late only skips the judgement, so that no check can flake.
func (c templateChecker) readEnded(spec, wide callSnapshot, o outcome, text string) {
	if !spec.quiet() || !wide.quiet() {
		return
	}
	specDead := spec.holder == nil || spec.holder.diedBefore(spec.begin)
	wideDead := wide.holder == nil || wide.holder.diedBefore(wide.begin)
	switch {
	case specDead && wideDead:
		c.t.Check(InvDeadEntryReturned, 1)
		if o == outcomeGone || o == outcomeOK {
			c.t.Violate(InvDeadEntryReturned, "a read of an item URI of %s that began at %d got %s (%q), but no template that matches it lived: a dead template matched",
				spec.ns.prefix, spec.begin, o, text)
		}
	case !specDead:
		if o != outcomeOK || !spec.holder.livedThrough() {
			return // it may have been gone for part of the read: the wide one may answer
		}
		c.t.Check(InvTemplateMatch, 1)
		if text != spec.holder.tag {
			what := "another consumer"
			if wide.holder != nil && text == wide.holder.tag {
				what = "the less specific " + wide.ns.name
			}
			c.t.Violate(InvTemplateMatch, "a read of an item URI of %s that began at %d, while %s held %s and lived, was answered by %s (%q)",
				spec.ns.prefix, spec.begin, spec.holder.tag, spec.ns.name, what, text)
		}
	default: // only the wide template lives
		if !wide.holder.livedThrough() {
			return
		}
		c.t.Check(InvDeadEntryReturned, 1)
		switch o {
		case outcomeGone, outcomeUnknown:
			c.t.Violate(InvDeadEntryReturned, "a read of an item URI of %s that began at %d got %s while %s (%s) lived and held its key, and %s was observed dead before: a dead template matched",
				spec.ns.prefix, spec.begin, o, wide.holder.tag, wide.ns.name, spec.ns.name)
			return
		case outcomeOK:
		default:
			return
		}
		c.t.Check(InvTemplateMatch, 1)
		if text == wide.holder.tag {
			return
		}
		if spec.holder != nil && text == spec.holder.tag {
			c.t.Violate(InvDeadEntryReturned, "a read of an item URI of %s that began at %d was answered by %s, observed dead (%s) at %d",
				spec.ns.prefix, spec.begin, spec.holder.tag, spec.holder.deathShape(), spec.holder.death.Load())
			return
		}
		c.t.Violate(InvTemplateMatch, "a read of an item URI of %s that began at %d, while only %s (%s) lived among its templates, was answered by %q",
			spec.ns.prefix, spec.begin, wide.holder.tag, wide.ns.name, text)
	}
}

// livedThrough reports, after an operation ended, that r's owner was
// alive and its Stop not begun from its start until now: deaths are
// permanent, and only its own Stop removes a live owner's entry, so its
// entry was in place throughout.
func (r *record) livedThrough() bool {
	return r.alive() && !r.stopping.Load()
}

// varsSeen checks, inside a reader, that it got exactly its own
// template's variable, holding what the URI holds after the template's
// literal prefix.
func (c templateChecker) varsSeen(rec *record, r catalog.Read) {
	c.t.Check(InvTemplateMatch, 1)
	want, ok := strings.CutPrefix(r.URI, rec.ns.prefix)
	if ok && len(r.Vars) == 1 && r.Vars[rec.varName] == want {
		return
	}
	c.t.Violate(InvTemplateMatch, "the reader of %s (%s) read %q with variables %v, want only %s=%q",
		rec.tag, rec.tmpl, r.URI, r.Vars, rec.varName, want)
}
