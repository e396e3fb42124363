package catalog

import "time"

// The test hooks below must be set before the routes they concern start, and
// not while calls run: they are plain fields.

func (c *Catalog) testHooks() *hooks {
	if c.hooks == nil {
		c.hooks = &hooks{}
	}
	return c.hooks
}

// SetBeforeReadyHook makes every start call fn after the route is set up
// and before it is marked ready: the window in which a route is registered
// but still starting.
func (c *Catalog) SetBeforeReadyHook(fn func(name string)) { c.testHooks().beforeReady = fn }

// SetBeforeRetireHook makes the reclaim of a dead consumer's route call fn
// first, so that a test can hold a dead owner's entry and plan in place, as
// they stand in the window before the catalog notices the death.
func (c *Catalog) SetBeforeRetireHook(fn func(name string)) { c.testHooks().beforeRetire = fn }

// SetAfterLookupHook makes every call run fn between resolving the route
// and guarding it: the window in which the entry may change hands.
func (c *Catalog) SetAfterLookupHook(fn func(name string)) { c.testHooks().afterLookup = fn }

// SetBeforeAdmitHook makes every call run fn between its guard and the
// gate: the window in which only the gate stands between a dying owner and
// its body.
func (c *Catalog) SetBeforeAdmitHook(fn func(name string)) { c.testHooks().beforeAdmit = fn }

// SetBeforeDrainHook makes every Stop run fn after it removed the route's
// entry and before it closes the route's gate: the owner is alive, its
// entry gone.
func (c *Catalog) SetBeforeDrainHook(fn func(name string)) { c.testHooks().beforeDrain = fn }

// SetAdmittingHook makes every call run fn between announcing itself at the
// gate and reading its owner's liveness: the Dekker window.
func (c *Catalog) SetAdmittingHook(fn func()) { c.testHooks().admitting = fn }

// SetHeldHook makes fn run whenever a dying owner finds an admission in
// progress and waits for it.
func (c *Catalog) SetHeldHook(fn func()) { c.testHooks().held = fn }

// SetDrainingHook makes fn run whenever a Stop finds bodies running and
// waits for them.
func (c *Catalog) SetDrainingHook(fn func()) { c.testHooks().draining = fn }

// SetLeavingHook makes every call leaving a gate (a body returning, or an
// admission refused) run fn between taking itself off its stripe and
// reading whether the gate is closing: the window a draining Stop must not
// lose its wake-up in.
func (c *Catalog) SetLeavingHook(fn func()) { c.testHooks().leaving = fn }

// SetClosedHook makes every Stop run fn after its drain has closed the gate
// and before it looks for calls admitted or being admitted.
func (c *Catalog) SetClosedHook(fn func()) { c.testHooks().closed = fn }

// SetReadyingHook makes every start run fn between marking itself complete
// and looking whether its route's reclaim has run: the window in which a
// death must still be counted by one of the two.
func (c *Catalog) SetReadyingHook(fn func(name string)) { c.testHooks().readying = fn }

// ToolEntries returns the tool entries held, dead ones included, without
// the prune that Stats' listing does first.
func (c *Catalog) ToolEntries() int { return c.tools.reg.Len() }

// Running returns the bodies of k's route running now.
func (k *Consumer) Running() int64 { return k.rt.gate.running() }

// SetStripes makes the gates of routes started from now on count on n
// stripes (0: the default), and returns a function that restores it.
func SetStripes(n int) (restore func()) {
	old := stripeCount
	stripeCount = n
	return func() { stripeCount = old }
}

// Waiting returns the calls waiting for a slot of k's route.
func (k *Consumer) Waiting() int64 {
	if k.rt.limit == nil {
		return 0
	}
	return k.rt.limit.waiting.Load()
}

// TypedToolOf is StartTypedTool's first half, the Tool and handler it
// starts, so that tests can look at the inferred schemas and call the
// handler directly.
func TypedToolOf[In, Out any](t Tool, h TypedHandler[In, Out]) (Tool, ToolHandler, error) {
	return typedTool(t, h)
}

// The limits, for the external tests that probe them.
const (
	DefaultMaxURIBytes  = defaultMaxURIBytes
	MaxCompletionValues = maxCompletionValues
)

// SetTaskClock makes the task store read the time from now.
func (c *Catalog) SetTaskClock(now func() time.Time) { c.tasks.now = now }

// SlotsHeld returns the slots of k's route (WithMaxConcurrent) taken now.
func (k *Consumer) SlotsHeld() int {
	if k.rt.limit == nil {
		return 0
	}
	return len(k.rt.limit.slots)
}
