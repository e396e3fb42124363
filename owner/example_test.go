package owner_test

import (
	"context"
	"fmt"

	"github.com/livereg/livereg/owner"
)

// A consumer holds the Token; a registry keeps only the Ref beside each
// entry and asks it whether the entry is stale.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	tok := owner.NewContext(ctx) // the consumer's start
	entryOwner := tok.Ref()      // what the registry stores

	fmt.Println("alive while running:", entryOwner.Alive())
	cancel() // the consumer's task is aborted
	<-entryOwner.Done()
	fmt.Println("alive after abort:", entryOwner.Alive())
	fmt.Println("same owner:", entryOwner.Same(tok.Ref()))
	// Output:
	// alive while running: true
	// alive after abort: false
	// same owner: true
}

// Run ties a token to a function's extent: it dies when the function
// returns, and also when it panics.
func ExampleRun() {
	var r owner.Ref
	_ = owner.Run(context.Background(), func(ctx context.Context, tok *owner.Token) error {
		r = tok.Ref()
		fmt.Println("inside:", r.Alive())
		return nil
	})
	fmt.Println("after:", r.Alive())
	// Output:
	// inside: true
	// after: false
}

// A registry keeps a DeathClock of its own and tracks the owner of every
// entry on it before the entry becomes visible. Two equal settled readings
// then prove that none of its owners died in between, whatever died
// elsewhere in the process.
func ExampleDeathClock() {
	var clock owner.DeathClock // one per registry
	mine, elsewhere := owner.New(), owner.New()
	if !mine.Ref().Track(&clock) { // before mine's entry can be seen
		fmt.Println("refused: the owner is dying")
	}

	before, _ := clock.Read()
	elsewhere.Release() // holds nothing in this registry
	after, settled := clock.Read()
	fmt.Println("unrelated death seen:", after != before || !settled)

	mine.Release()
	after, settled = clock.Read()
	fmt.Println("own owner's death seen:", after != before || !settled)
	// Output:
	// unrelated death seen: false
	// own owner's death seen: true
}
