package catalog

// SetBeforeReadyHook makes every start call fn after the route's bridge is
// up and before the route is marked ready: the window in which a route is
// registered but still starting.
func (c *Catalog) SetBeforeReadyHook(fn func(name string)) { c.beforeReady = fn }

// SetBeforeRetireHook makes the reclaim of a dead consumer's route call fn
// first, so that a test can hold a dead owner's entry and plan in place, as
// they stand in the window before the catalog notices the death.
func (c *Catalog) SetBeforeRetireHook(fn func(name string)) { c.beforeRetire = fn }

// ToolEntries returns the tool entries held, dead ones included, without
// the prune that Stats' listing does first.
func (c *Catalog) ToolEntries() int { return c.tools.reg.Len() }

// InFlight returns the calls between hand-off and reply on k's route.
func (k *Consumer) InFlight() int64 { return k.rt.inflight.Load() }

// Queued returns the calls waiting in k's route queue.
func (k *Consumer) Queued() int { return len(k.rt.inbox) }
