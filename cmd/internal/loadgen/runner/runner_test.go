package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// rig is a plan whose workers loop until told to stop, and a log of the
// runner's calls into it, in order.
type rig struct {
	mu   sync.Mutex
	log  []string
	stop chan struct{} // closed by Stop: the resolvers' signal
	halt chan struct{} // closed by StopConsumers: the consumers' signal
}

func (r *rig) note(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *rig) plan(resolvers, consumers int) Plan {
	r.stop, r.halt = make(chan struct{}), make(chan struct{})
	p := Plan{
		Stop:          func(e End) { r.note(fmt.Sprintf("stop %d", e)); close(r.stop) },
		StopConsumers: func() { r.note("stop consumers"); close(r.halt) },
		ResolverGrace: time.Second,
		ConsumerGrace: 2 * time.Second,
		Unexpected:    func(format string, args ...any) { r.note("unexpected: " + fmt.Sprintf(format, args...)) },
	}
	for range resolvers {
		p.Resolvers = append(p.Resolvers, func(context.Context) { <-r.stop; r.note("resolver done") })
	}
	for range consumers {
		p.Consumers = append(p.Consumers, func() { <-r.halt; r.note("consumer done") })
	}
	return p
}

// The load runs for its duration, then the resolvers are stopped and
// waited for before the consumers are told.
func TestRunDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r rig
		p := r.plan(1, 1)
		p.Duration = 3 * time.Second
		end, elapsed := Run(context.Background(), p)
		if end != EndDuration || elapsed != 3*time.Second {
			t.Errorf("Run = %v, %v; want EndDuration after 3s", end, elapsed)
		}
		want := []string{fmt.Sprintf("stop %d", EndDuration), "resolver done", "stop consumers", "consumer done"}
		if !slices.Equal(r.log, want) {
			t.Errorf("calls %q, want %q", r.log, want)
		}
	})
}

// A signal (ctx) or the world's own Done ends the load before the
// duration; with no duration, only they do.
func TestRunEarlyEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r rig
		p := r.plan(2, 2)
		p.Duration = time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		if end, elapsed := Run(ctx, p); end != EndInterrupted || elapsed != time.Second {
			t.Errorf("Run = %v, %v; want EndInterrupted after 1s", end, elapsed)
		}

		p = r.plan(1, 1)
		done := make(chan struct{})
		p.Done = done
		time.AfterFunc(2*time.Second, func() { close(done) })
		if end, elapsed := Run(context.Background(), p); end != EndDone || elapsed != 2*time.Second {
			t.Errorf("Run = %v, %v; want EndDone after 2s", end, elapsed)
		}
		for _, l := range r.log {
			if strings.HasPrefix(l, "unexpected") {
				t.Errorf("%s", l)
			}
		}
	})
}

// A resolver that does not return within its grace after Stop gets its
// ctx cancelled, which a call of a hung system needs to return, and the
// overstay is counted; so is a consumer's beyond its grace.
func TestRunGraces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r rig
		p := r.plan(0, 0)
		p.Duration = time.Second
		var cancelledAfter atomic.Int64
		p.Resolvers = []func(context.Context){func(ctx context.Context) {
			<-r.stop
			t0 := time.Now()
			<-ctx.Done() // a call that only its context ends
			cancelledAfter.Store(int64(time.Since(t0)))
		}}
		release := make(chan struct{})
		p.Consumers = []func(){func() { <-release }}
		Run(context.Background(), p)
		if got := time.Duration(cancelledAfter.Load()); got != p.ResolverGrace {
			t.Errorf("the hung resolver's ctx was cancelled %v after Stop, want the grace, %v", got, p.ResolverGrace)
		}
		var unexpected []string
		for _, l := range r.log {
			if strings.HasPrefix(l, "unexpected") {
				unexpected = append(unexpected, l)
			}
		}
		if len(unexpected) != 2 || !strings.Contains(unexpected[0], "resolvers still busy 1s") || !strings.Contains(unexpected[1], "consumer goroutines still busy") {
			t.Errorf("unexpected errors %q, want the resolvers' then the consumers'", unexpected)
		}
		close(release)
		synctest.Wait()
	})
}
