package catalog

import (
	"sync/atomic"

	"github.com/livereg/livereg/shardreg"
)

func page[T any](reg *shardreg.Registry[*route], cursor string, limit int, f func(*route) T) ([]T, string, error) {
	entries, next, err := reg.Page(cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]T, len(entries))
	for i, e := range entries {
		out[i] = f(e.Value)
	}
	return out, next, nil
}

// projection caches one listing converted from registry entries, keyed by
// the identity of the registry's cached slice it was made from: while the
// registry serves the same snapshot, the conversion is reused.
type projection[T any] struct {
	src *shardreg.Entry[*route]
	n   int
	out []T
}

func project[T any](entries []shardreg.Entry[*route], cache *atomic.Pointer[projection[T]], f func(*route) T) []T {
	if len(entries) == 0 {
		return nil
	}
	if p := cache.Load(); p != nil && p.src == &entries[0] && p.n == len(entries) {
		return p.out
	}
	out := make([]T, len(entries))
	for i, e := range entries {
		out[i] = f(e.Value)
	}
	cache.Store(&projection[T]{src: &entries[0], n: len(entries), out: out})
	return out
}

// Version returns a number that grows with every change a listing can see:
// a route becoming ready, stopping, or being reclaimed after its owner
// died, here or, with a Remote, on another replica.
func (c *Catalog) Version() uint64 {
	return c.Tools().Version() + c.Resources().Version() + c.Prompts().Version() + c.Templates().Version()
}

// Changes returns a channel that is closed at the next change to the
// catalog's listings after the call: a route becoming ready, stopping, or
// being reclaimed after its owner died, or a change the Remote reports. To follow changes without missing
// one, take the channel, then read Version, then wait.
func (c *Catalog) Changes() <-chan struct{} { return *c.changed.Load() }

func (c *Catalog) notify() {
	next := make(chan struct{})
	close(*c.changed.Swap(&next))
}

// Stats is a summary of a catalog's state.
type Stats struct {
	Tools, Resources         int // ready routes of live owners
	ToolSlots, ResourceSlots int // entries held against the caps
	Version                  uint64
	// Calls counts calls by outcome and Deaths started consumers' deaths
	// by path, since New. A death's route is reclaimed, entry and plan,
	// as it is counted, so Deaths less Deaths.Stop is also the dead
	// entries reclaimed.
	Calls  CallCounts
	Deaths DeathCounts
	// Duplicates and CapRefusals count starts refused with ErrDuplicate
	// and ErrCapReached.
	Duplicates, CapRefusals uint64
	// Prompts and Templates are ready prompts and resource templates of
	// live owners; PromptSlots and TemplateSlots their entries held
	// against the caps.
	Prompts, Templates, PromptSlots, TemplateSlots int
	// Tasks is the task store as it holds now (task.go).
	Tasks TaskCounts
}

// TaskCounts is what a catalog's task store holds: the tasks, working or
// kept after their end until they expire, the most that one share (a
// credential, or a WithTaskShare client) holds, and the bytes of the
// results kept. They stay within Config.MaxTasks,
// Config.MaxTasksPerCaller and Config.MaxTaskResultBytes.
type TaskCounts struct {
	Held, MostPerCaller int
	ResultBytes         int64
}

// Stats returns a summary of the catalog.
//
// The counters are read one by one, not at one instant: under load the
// snapshot may count a call or a death in one field that it misses in a
// neighbouring one. It costs a listing of each kind, a pass over 16
// small stripes, and one over the credentials that hold tasks, under the
// task store's lock.
func (c *Catalog) Stats() Stats {
	calls, deaths := c.counted()
	return Stats{
		Tools:         len(c.tools.reg.ListReady()),
		Resources:     len(c.resources.reg.ListReady()),
		ToolSlots:     c.tools.reg.Len(),
		ResourceSlots: c.resources.reg.Len(),
		Version:       c.Version(),
		Calls:         calls,
		Deaths:        deaths,
		Duplicates:    c.counts.duplicates.Load(),
		CapRefusals:   c.counts.capRefusals.Load(),
		Prompts:       len(c.prompts.reg.ListReady()),
		Templates:     len(c.templates.reg.ListReady()),
		PromptSlots:   c.prompts.reg.Len(),
		TemplateSlots: c.templates.reg.Len(),
		Tasks:         c.tasks.counts(),
	}
}
