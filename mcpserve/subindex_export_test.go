package mcpserve

// SetRecheckHook makes f run for each URI the subscription re-check looks
// up, with no lock held; the returned function removes it.
func SetRecheckHook(f func(uri string)) (restore func()) {
	testHookRecheck = f
	return func() { testHookRecheck = nil }
}

// SetRecheckDroppedHook makes f run once the subscription re-check has
// dropped a dead owner's URIs from the server's table, before it tells
// their subscribers and drops them from the SDK's; the returned function
// removes it.
func SetRecheckDroppedHook(f func()) (restore func()) {
	testHookRecheckDropped = f
	return func() { testHookRecheckDropped = nil }
}
