package mcpserve_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// churner starts and kills consumers under a set of names until stopped,
// by Stop and by context cancellation in turn. With a steps channel it
// makes a few changes per value received; without, it runs flat out.
type churner struct {
	cat   *catalog.Catalog
	names []string
	steps chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func startChurner(cat *catalog.Catalog, names []string, steps chan struct{}) *churner {
	ch := &churner{cat: cat, names: names, steps: steps, stop: make(chan struct{}), done: make(chan struct{})}
	go ch.run()
	return ch
}

func (ch *churner) run() {
	defer close(ch.done)
	type slot struct {
		k      *catalog.Consumer
		cancel context.CancelFunc
	}
	slots := make([]slot, len(ch.names))
	defer func() {
		for _, s := range slots {
			if s.k != nil {
				_ = s.k.Stop(context.Background())
				s.cancel()
			}
		}
	}()
	for round := 0; ; round++ {
		if ch.steps != nil && round%4 == 0 {
			select {
			case <-ch.steps:
			case <-ch.stop:
				return
			}
		}
		select {
		case <-ch.stop:
			return
		default:
		}
		i := round % len(slots)
		s := &slots[i]
		if s.k == nil {
			ctx, cancel := context.WithCancel(context.Background())
			k, err := ch.cat.StartTool(ctx, catalog.Tool{Name: ch.names[i], Description: "churn"}, bindsec.Plan{Public: true},
				func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("churn"), nil })
			if err != nil {
				// The previous owner's death is not reclaimed yet.
				cancel()
				continue
			}
			s.k, s.cancel = k, cancel
			continue
		}
		if round%3 == 0 {
			s.cancel()
		} else {
			_ = s.k.Stop(context.Background())
			s.cancel()
		}
		s.k = nil
	}
}

func (ch *churner) close() {
	close(ch.stop)
	<-ch.done
}

// A paginated walk while consumers come and go returns every tool that
// lives through the walk exactly once, in order, and no name twice.
func TestPaginationWhileChurning(t *testing.T) {
	const n = 60
	cat := newCatalog(t, catalog.Config{MaxTools: 4 * n})
	var stable, churn []string
	for i := range n {
		stable = append(stable, fmt.Sprintf("t%03d-s", i))
		churn = append(churn, fmt.Sprintf("t%03d-c", i))
	}
	for _, name := range stable {
		startText(t, cat, context.Background(), name, name)
	}
	f := newFixture(t, cat, mcpserve.Options{PageSize: 7})
	clients := []*client{f.connect(memory, ""), f.connect(streamable, "")}
	// The walkers drive the churn: a few changes between any two pages.
	steps := make(chan struct{}, 64)
	ch := startChurner(cat, churn, steps)
	defer ch.close()

	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for range 10 {
				walk(t, c, stable, steps)
			}
		})
	}
	wg.Wait()
}

func walk(t *testing.T, c *client, stable []string, steps chan<- struct{}) {
	seen := map[string]int{}
	last, cursor, pages := "", "", 0
	for {
		res, err := c.ListTools(ctxGuard(t), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Errorf("page %d: %v", pages, err)
			return
		}
		pages++
		select {
		case steps <- struct{}{}:
		default:
		}
		if len(res.Tools) > 7 {
			t.Errorf("page of %d tools, want at most 7", len(res.Tools))
		}
		for _, tool := range res.Tools {
			if tool.Name <= last {
				t.Errorf("walk returned %q after %q: duplicate or out of order", tool.Name, last)
			}
			last = tool.Name
			seen[tool.Name]++
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	for _, name := range stable {
		if seen[name] != 1 {
			t.Errorf("stable tool %q returned %d times in one walk, want once", name, seen[name])
		}
	}
	if pages < len(stable)/7 {
		t.Errorf("walk took %d pages, want at least %d", pages, len(stable)/7)
	}
}
