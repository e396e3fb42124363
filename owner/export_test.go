package owner

// SetDeathFlippedHook installs f to run inside every death, after the cell
// reads dead and before the death counts as completed, and returns a
// function that removes it. Tests use it to hold a death in that window.
// It must not be called while deaths are happening.
func SetDeathFlippedHook(f func()) (restore func()) {
	testHookDeathFlipped = f
	return func() { testHookDeathFlipped = nil }
}

// SetBeforeFlipHook installs f to run inside every death just before the
// flip to dead, once the death has sealed the token and waited out its
// holds and holders: the token is dying and still reads alive. It returns a
// function that removes it, and must not be called while deaths happen.
func SetBeforeFlipHook(f func()) (restore func()) {
	testHookBeforeFlip = f
	return func() { testHookBeforeFlip = nil }
}

// SetEnteringHook installs f to run inside every Enter after it announced
// its hold and before it reads the token's state: the window that a death
// beginning in it must not slip through. It returns a function that removes
// it, and must not be called while Enters happen.
func SetEnteringHook(f func()) (restore func()) {
	testHookEntering = f
	return func() { testHookEntering = nil }
}

// SetTrackingHook installs f to run inside every Track after it attached
// its clock as the token's own and before it reads the token's state. It
// returns a function that removes it, and must not be called while Tracks
// happen.
func SetTrackingHook(f func()) (restore func()) {
	testHookTracking = f
	return func() { testHookTracking = nil }
}
