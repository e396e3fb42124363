package catalog

// A task's watcher (an MCP server pushing notifications/tasks, say) waits
// for the task's next change without polling and without a goroutine or a
// timer of the catalog's: each task keeps a channel that its next change
// closes, made only once somebody watches, and a watcher takes a fresh one
// with each look (WatchTask). A change is whatever alters what GetTask
// returns but its clock: a status (working to input_required and back,
// the end), or the open questions of a task that waits for input. The
// death of a task's consumer is a change at once, by either path that
// ends it: its route's after-death function (endTasks) or the first read
// that finds the consumer dead (taskStore.read).

// WatchTask returns the task id as it reads now, as credential may see
// it, and a channel closed at its next change; nil once the task has
// ended, since an ended task never changes again. Errors: ErrNotFound, as
// for GetTask.
//
// The read and the channel are one step: a change after the read closes
// the channel, so a watcher that looks again each time the channel closes
// misses no end. It sees the latest state, not every one: changes between
// two looks are seen as one, the last. It is safe for concurrent use and
// costs what GetTask costs, and an allocation for the first watcher of
// each change; a change costs its task a channel close only when somebody
// watches.
func (c *Catalog) WatchTask(id, credential string) (TaskInfo, <-chan struct{}, error) {
	t, err := c.tasks.find(id, credential)
	if err != nil {
		return TaskInfo{}, nil, err
	}
	s := c.tasks
	if !t.ref.Alive() && s.end(t, TaskFailed, Result{}, deathError(t.tool, t.ref)) {
		t.cancel()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	info := t.infoLocked()
	if info.Terminal() {
		return info, nil, nil
	}
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return info, t.changed, nil
}

// changedLocked tells t's watchers that it changed; t.mu is held.
func (t *task) changedLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}
