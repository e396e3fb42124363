// Package runner is the load phase both loadgen worlds share: start the
// resolvers and consumers, let them run until the duration passes, a
// signal comes or the world ends the load itself, then wind them down,
// each group within its grace, cancelling calls that hang and counting
// what overstays as an unexpected error. What a world does before the
// load (its system, its background checkers) and after it (its quiet
// phase and its report) stays its own.
package runner

import (
	"context"
	"sync"
	"time"

	"github.com/livereg/livereg/cmd/internal/loadgen/wait"
)

// End is why the load phase ended.
type End int

const (
	EndDuration    End = iota // the duration passed
	EndInterrupted            // ctx ended (SIGINT, SIGTERM) first
	EndDone                   // the world closed Plan.Done first
)

// Plan is one world's load phase.
type Plan struct {
	// Duration is how long the load runs; 0 runs it until Done closes or
	// ctx ends.
	Duration time.Duration
	// Done, if not nil, ends the load when it closes: the world's own
	// reason to stop early (an operation count reached).
	Done <-chan struct{}

	// Resolvers each run on their own goroutine until Stop, with a ctx
	// that is cancelled only when they outlast ResolverGrace after it:
	// what cancels the calls a hung system would never return.
	Resolvers []func(ctx context.Context)
	// Consumers each run on their own goroutine until StopConsumers.
	Consumers []func()

	// Stop tells the resolvers the load is over, and why; StopConsumers,
	// called once the resolvers are done, tells the consumers. Either may
	// be nil when the workers watch something Stop already ends.
	Stop          func(End)
	StopConsumers func()
	// ResolverGrace and ConsumerGrace are how long each group may take
	// to finish the operation it is in once told to stop.
	ResolverGrace, ConsumerGrace time.Duration
	// Unexpected counts an error a correct system does not produce: here,
	// a group that overstays its grace.
	Unexpected func(format string, args ...any)
}

// Run runs p's load phase and returns why it ended and how long the load
// ran (the wind-down excluded). It returns once every resolver has
// returned, or has overstayed its grace twice, the second time with its
// ctx cancelled, and every consumer has returned or overstayed its own.
func Run(ctx context.Context, p Plan) (End, time.Duration) {
	callCtx, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	var resolvers, consumers sync.WaitGroup
	for _, fn := range p.Resolvers {
		resolvers.Go(func() { fn(callCtx) })
	}
	for _, fn := range p.Consumers {
		consumers.Go(fn)
	}

	began := time.Now()
	var timeout <-chan time.Time
	if p.Duration > 0 {
		t := time.NewTimer(p.Duration)
		defer t.Stop()
		timeout = t.C
	}
	var end End
	select {
	case <-timeout:
		end = EndDuration
	case <-ctx.Done():
		end = EndInterrupted
	case <-p.Done: // nil: never
		end = EndDone
	}
	elapsed := time.Since(began)

	if p.Stop != nil {
		p.Stop(end)
	}
	// Workers finish the operation they are in. A system that hangs a
	// call gets its context cancelled after the grace rather than hanging
	// the run.
	if !wait.Group(&resolvers, p.ResolverGrace) {
		cancelCalls()
		p.Unexpected("resolvers still busy %v after the run ended: in-flight calls cancelled", p.ResolverGrace)
		wait.Group(&resolvers, p.ResolverGrace)
	}
	if p.StopConsumers != nil {
		p.StopConsumers()
	}
	if !wait.Group(&consumers, p.ConsumerGrace) {
		p.Unexpected("consumer goroutines still busy after the run ended")
	}
	return end, elapsed
}
