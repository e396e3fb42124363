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
