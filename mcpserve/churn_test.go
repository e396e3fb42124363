package mcpserve_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// generation is one consumer's life under a name.
type generation struct {
	id      int
	stopped atomic.Bool   // set once Stop has returned nil
	gone    chan struct{} // closed when the owner's death is observed
}

// restarter keeps one consumer alive under a name, killing it (by Stop and
// by cancellation in turn) every few steps and starting a successor once
// the death is observed. A call can also kill it by making its body panic.
type restarter struct {
	cat        *catalog.Catalog
	name       string
	steps      chan struct{}
	stop       chan struct{}
	done       chan struct{}
	generation atomic.Int64 // the newest generation started
	violations *atomic.Int64
	kills      atomic.Int64
	err        error // a restart that failed; read after done
}

func (r *restarter) run() {
	defer close(r.done)
	for id := 1; ; id++ {
		g := &generation{id: id, gone: make(chan struct{})}
		// Announced before the start: a call can reach the new body as
		// soon as it is ready, before StartTool has returned.
		r.generation.Store(int64(id))
		ctx, cancel := context.WithCancel(context.Background())
		k, err := r.cat.StartTool(ctx, catalog.Tool{Name: r.name, Description: "churning"}, bindsec.Plan{Public: true},
			func(_ context.Context, c catalog.Call) (catalog.Result, error) {
				// A body admitted just before a cancellation or a panic
				// may begin after Done closed; none may begin after a
				// Stop that returned nil, which drains the gate.
				if g.stopped.Load() {
					r.violations.Add(1)
				}
				if strings.Contains(string(c.Arguments), "panic") {
					panic("asked to")
				}
				runtime.Gosched()
				if g.stopped.Load() {
					r.violations.Add(1) // still running after Stop returned
				}
				return catalog.TextResult(r.name + "#" + strconv.Itoa(g.id)), nil
			})
		if err != nil {
			cancel()
			r.err = err
			<-r.stop
			return
		}
		go func() { <-k.Done(); close(g.gone) }()

		stopping := false
	live:
		for n := 0; n < 3; n++ {
			select {
			case <-r.steps:
			case <-g.gone: // a panicking call killed it
				break live
			case <-r.stop:
				stopping = true
				break live
			}
		}
		if id%2 == 0 {
			r.stopOnce(k, g)
		}
		cancel()
		<-g.gone
		r.kills.Add(1)
		if stopping {
			r.stopOnce(k, g)
			return
		}
	}
}

// stopOnce stops k and marks g stopped once Stop has drained its gate.
func (r *restarter) stopOnce(k *catalog.Consumer, g *generation) {
	if err := k.Stop(context.Background()); err != nil {
		r.err = err
		return
	}
	g.stopped.Store(true)
}

// 500 concurrent tools/call from 8 sessions over all transports while the
// consumers behind the tools die and restart: every call returns, each with
// the answer of a consumer that was alive when its body started or with a
// clean error, and no body runs after its owner's Stop returned.
func TestConcurrentCallsWhileRestarting(t *testing.T) {
	const (
		calls    = 500
		sessions = 8
		names    = 4
	)
	cat := newCatalog(t, catalog.Config{})
	f := newFixture(t, cat, mcpserve.Options{})
	var clients []*client
	for i := range sessions {
		clients = append(clients, f.connect(allTransports[i%len(allTransports)], ""))
	}

	var violations atomic.Int64
	steps := make(chan struct{}, calls)
	var rs []*restarter
	for i := range names {
		r := &restarter{cat: cat, name: fmt.Sprintf("w%d", i), steps: steps, stop: make(chan struct{}),
			done: make(chan struct{}), violations: &violations}
		rs = append(rs, r)
		go r.run()
	}
	stopRestarters := func() {
		for _, r := range rs {
			close(r.stop)
			<-r.done
		}
	}

	var ok, gone, panicked, overloaded atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			c, r := clients[i%sessions], rs[i%names]
			args := map[string]any{}
			if i%25 == 7 {
				args["panic"] = true
			}
			// The request deadline: a call that is still waiting when it
			// passes has hung.
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: r.name, Arguments: args})
			select {
			case steps <- struct{}{}:
			default:
			}
			switch {
			case err == nil && !res.IsError:
				got := text(t, res)
				gen, perr := strconv.Atoi(strings.TrimPrefix(got, r.name+"#"))
				if perr != nil || gen < 1 || int64(gen) > r.generation.Load() {
					t.Errorf("call %d: answer %q is no generation of %s", i, got, r.name)
				}
				ok.Add(1)
			case err == nil && res.IsError && text(t, res) == fmt.Sprintf("tool %q failed: internal error", r.name):
				if args["panic"] != true {
					t.Errorf("call %d: reported a panic it did not ask for", i)
				}
				panicked.Add(1)
			case rpcCode(err) == jsonrpc.CodeInvalidParams:
				gone.Add(1) // unknown (between lives) or gone (died after the lookup)
			case rpcCode(err) == mcpserve.CodeOverloaded:
				overloaded.Add(1)
			case errors.Is(err, context.DeadlineExceeded):
				t.Errorf("call %d hung past its deadline", i)
			case err == nil:
				t.Errorf("call %d: unclean outcome %q (isError %v)", i, text(t, res), res.IsError)
			default:
				t.Errorf("call %d: unclean outcome %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	stopRestarters()

	var kills int64
	for _, r := range rs {
		kills += r.kills.Load()
		if r.err != nil {
			t.Errorf("restart of %s failed: %v", r.name, r.err)
		}
	}
	t.Logf("%d calls: %d answered, %d unknown or gone, %d panicked, %d overloaded; %d consumer deaths",
		calls, ok.Load(), gone.Load(), panicked.Load(), overloaded.Load(), kills)
	if n := ok.Load() + gone.Load() + panicked.Load() + overloaded.Load(); n != calls {
		t.Errorf("%d of %d calls accounted for", n, calls)
	}
	if ok.Load() == 0 || kills < names {
		t.Errorf("the test did not exercise both answers and deaths")
	}
	if v := violations.Load(); v != 0 {
		t.Errorf("%d bodies ran after their owner's Stop returned", v)
	}
}
