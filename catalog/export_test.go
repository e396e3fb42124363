package catalog

// SetBeforeReadyHook makes every start call fn after the route's bridge is
// up and before the route is marked ready: the window in which a route is
// registered but still starting.
func (c *Catalog) SetBeforeReadyHook(fn func(name string)) { c.beforeReady = fn }

// InFlight returns the calls between hand-off and reply on k's route.
func (k *Consumer) InFlight() int64 { return k.rt.inflight.Load() }

// Queued returns the calls waiting in k's route queue.
func (k *Consumer) Queued() int { return len(k.rt.inbox) }
