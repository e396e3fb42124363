package mcpserve

// SetRecheckHook makes f run for each URI the subscription re-check looks
// up, with no lock held; the returned function removes it.
func SetRecheckHook(f func(uri string)) (restore func()) {
	testHookRecheck = f
	return func() { testHookRecheck = nil }
}
