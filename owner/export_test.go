package owner

// SetDeathFlippedHook installs f to run inside every death, after the cell
// reads dead and before the death counts as completed, and returns a
// function that removes it. Tests use it to hold a death in that window.
// It must not be called while deaths are happening.
func SetDeathFlippedHook(f func()) (restore func()) {
	testHookDeathFlipped = f
	return func() { testHookDeathFlipped = nil }
}
