package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	public = bindsec.Plan{Public: true}
	bg     = context.Background()
)

func newCatalog(t testing.TB, cfg catalog.Config) *catalog.Catalog {
	t.Helper()
	c, err := catalog.New(cfg)
	require.NoError(t, err)
	return c
}

// reply returns a handler that answers text.
func reply(text string) catalog.ToolHandler {
	return func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult(text), nil }
}

// startTool starts a tool and stops it when the test ends.
func startTool(t testing.TB, c *catalog.Catalog, ctx context.Context, name string, p bindsec.Plan, h catalog.ToolHandler) *catalog.Consumer {
	t.Helper()
	k, err := c.StartTool(ctx, catalog.Tool{Name: name}, p, h)
	require.NoError(t, err)
	t.Cleanup(func() { stopBounded(k) })
	return k
}

func callText(t testing.TB, c *catalog.Catalog, name, credential string) (string, error) {
	t.Helper()
	res, err := c.CallTool(bg, name, json.RawMessage(`{}`), credential)
	if err != nil {
		return "", err
	}
	require.NotEmpty(t, res.Content)
	return res.Content[0].Text, nil
}

func toolNames(c *catalog.Catalog) []string {
	var out []string
	for _, tl := range c.Tools().List() {
		out = append(out, tl.Name)
	}
	return out
}

// awaitGone waits until name is no longer listed: the catalog reclaims a
// dead owner's route from the route's own goroutines, a moment after the
// death.
func awaitGone(t *testing.T, c *catalog.Catalog, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range toolNames(c) {
			if n == name {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "%s still listed", name)
}

func TestCallRoutesToHandler(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var got catalog.Call
	startTool(t, c, bg, "echo", public, func(_ context.Context, call catalog.Call) (catalog.Result, error) {
		got = call
		return catalog.Result{Content: []catalog.Content{{Type: "text", Text: string(call.Arguments)}}, StructuredContent: map[string]int{"n": 1}}, nil
	})
	res, err := c.CallTool(bg, "echo", json.RawMessage(`{"x":1}`), "")
	require.NoError(t, err)
	assert.Equal(t, `{"x":1}`, res.Content[0].Text)
	assert.Equal(t, map[string]int{"n": 1}, res.StructuredContent)
	assert.Equal(t, "echo", got.Name)

	handlerErr := errors.New("tool failed")
	startTool(t, c, bg, "fails", public, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, handlerErr })
	_, err = c.CallTool(bg, "fails", nil, "")
	assert.ErrorIs(t, err, handlerErr, "a handler's error reaches the caller unchanged")
}

func TestStoppedToolIsUnknown(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var runs atomic.Int32
	k := startTool(t, c, bg, "tool", public, func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.TextResult("ok"), nil
	})
	require.NoError(t, k.Stop(bg))
	require.NoError(t, k.Stop(bg), "a second Stop is a no-op")

	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "tool", nil, "")
	assert.ErrorIs(t, err, catalog.ErrNotFound)
	assert.NoError(t, ctx.Err(), "the call must fail at once, not wait on a dead channel")
	assert.Zero(t, runs.Load())
	assert.Empty(t, c.Tools().List())
	assert.Zero(t, c.Stats().ToolSlots)
}

// dropConsumer starts a consumer and returns nothing that keeps it.
//
//go:noinline
func dropConsumer(t *testing.T, c *catalog.Catalog, name string) <-chan struct{} {
	k, err := c.StartTool(bg, catalog.Tool{Name: name}, public, reply("old"))
	require.NoError(t, err)
	return k.Done()
}

// Each way a consumer can die leaves its name free for a restart.
func TestEveryDeathFreesTheName(t *testing.T) {
	deaths := []struct {
		name string
		kill func(t *testing.T, c *catalog.Catalog) <-chan struct{}
	}{
		{"stop", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			k, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, public, reply("old"))
			require.NoError(t, err)
			require.NoError(t, k.Stop(bg))
			return k.Done()
		}},
		{"context cancel", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			ctx, cancel := context.WithCancel(bg)
			k, err := c.StartTool(ctx, catalog.Tool{Name: "tool"}, public, reply("old"))
			require.NoError(t, err)
			cancel()
			return k.Done()
		}},
		{"panic", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			k, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
				panic("route body bug")
			})
			require.NoError(t, err)
			_, err = c.CallTool(bg, "tool", nil, "")
			require.ErrorIs(t, err, catalog.ErrRoutePanicked)
			assert.Contains(t, err.Error(), "route body bug")
			return k.Done()
		}},
		{"dropped without stop", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			done := dropConsumer(t, c, "tool")
			for range 1000 {
				runtime.GC()
				select {
				case <-done:
					return done
				case <-time.After(5 * time.Millisecond):
				}
			}
			t.Fatal("a dropped consumer never died")
			return nil
		}},
	}
	for _, d := range deaths {
		t.Run(d.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			done := d.kill(t, c)
			waitClosed(t, done, "the death")
			awaitGone(t, c, "tool")

			startTool(t, c, bg, "tool", public, reply("new"))
			text, err := callText(t, c, "tool", "")
			require.NoError(t, err)
			assert.Equal(t, "new", text)
			assert.Equal(t, []string{"tool"}, toolNames(c))
		})
	}
}

// A restart need not wait for the reclaim: register replaces a dead
// owner's entry itself.
func TestRestartRightAfterDeath(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	for i := range 200 {
		ctx, cancel := context.WithCancel(bg)
		k, err := c.StartTool(ctx, catalog.Tool{Name: "tool"}, public, reply(fmt.Sprint(i)))
		require.NoError(t, err, "round %d", i)
		cancel()
		<-k.Done()
	}
	awaitGone(t, c, "tool")
	assert.Zero(t, c.Stats().ToolSlots)
}

func TestLiveDuplicateAndLateStop(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-b": bindsec.NewPrincipal("b", "b"),
	})})
	ctxA, cancelA := context.WithCancel(bg)
	a := startTool(t, c, ctxA, "tool", public, reply("a"))

	_, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, bindsec.Plan{Roles: []string{"x"}}, reply("dup"))
	require.ErrorIs(t, err, catalog.ErrDuplicate)
	assert.Contains(t, err.Error(), `"tool"`, "the error names the route")
	text, err := callText(t, c, "tool", "")
	require.NoError(t, err, "the failed duplicate must leave A's public plan in force")
	assert.Equal(t, "a", text)

	cancelA()
	<-a.Done()
	startTool(t, c, bg, "tool", bindsec.Plan{Roles: []string{"b"}}, reply("b"))
	require.NoError(t, a.Stop(bg), "A's late stop")

	text, err = callText(t, c, "tool", "tok-b")
	require.NoError(t, err, "B's entry survives A's late stop")
	assert.Equal(t, "b", text)
	_, err = callText(t, c, "tool", "")
	assert.ErrorIs(t, err, bindsec.ErrUnauthenticated, "B's plan survives A's late stop")
}

func TestResources(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var reads atomic.Int32
	reader := func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		reads.Add(1)
		return catalog.Contents{MIMEType: "text/plain", Text: "contents of " + r.URI}, nil
	}
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartResource(ctx, catalog.Resource{URI: "test://doc", Name: "doc"}, public, reader)
	require.NoError(t, err)
	other, err := c.StartResource(bg, catalog.Resource{URI: "file:///a", Name: "a"}, public, reader)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Stop(bg) })

	var uris []string
	for _, r := range c.Resources().List() {
		uris = append(uris, r.URI)
	}
	assert.Equal(t, []string{"file:///a", "test://doc"}, uris)

	got, err := c.ReadResource(bg, "test://doc", "")
	require.NoError(t, err)
	assert.Equal(t, catalog.Contents{URI: "test://doc", MIMEType: "text/plain", Text: "contents of test://doc"}, got)

	before := reads.Load()
	_, err = c.ReadResource(bg, "test://missing", "")
	assert.ErrorIs(t, err, catalog.ErrNotFound)
	assert.Equal(t, before, reads.Load(), "an unknown URI runs no body")
	_, err = c.StartResource(bg, catalog.Resource{URI: "relative/path"}, public, reader)
	assert.ErrorIs(t, err, catalog.ErrInvalidName)

	// A stopped route: a clean error, and its body never runs.
	require.NoError(t, other.Stop(bg))
	before = reads.Load()
	_, err = c.ReadResource(bg, "file:///a", "")
	assert.ErrorIs(t, err, catalog.ErrNotFound)
	assert.Equal(t, before, reads.Load(), "a stopped route's body never runs")

	cancel()
	<-k.Done()
	before = reads.Load()
	_, err = c.ReadResource(bg, "test://doc", "")
	assert.True(t, errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone), "got %v", err)
	assert.Equal(t, before, reads.Load(), "a dead route's body never runs")

	k2, err := c.StartResource(bg, catalog.Resource{URI: "test://doc"}, public, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: "new"}, nil
	})
	require.NoError(t, err, "a dead owner's URI is taken over")
	t.Cleanup(func() { _ = k2.Stop(bg) })
	got, err = c.ReadResource(bg, "test://doc", "")
	require.NoError(t, err)
	assert.Equal(t, "new", got.Text)
}

func TestStartingToolIsNotListedOrCallable(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var runs, hooked atomic.Int32
	c.SetBeforeReadyHook(func(name string) {
		hooked.Add(1)
		assert.NotContains(t, toolNames(c), name, "listed while starting")
		_, err := c.CallTool(bg, name, nil, "")
		assert.ErrorIs(t, err, catalog.ErrNotFound, "callable while starting")
		assert.Equal(t, 1, c.Stats().ToolSlots, "it holds its slot while starting")
	})
	startTool(t, c, bg, "tool", public, func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.Result{}, nil
	})
	c.SetBeforeReadyHook(nil)
	require.Equal(t, int32(1), hooked.Load(), "the start passed through its starting window")
	assert.Zero(t, runs.Load())
	assert.Equal(t, []string{"tool"}, toolNames(c))
}

func TestCap(t *testing.T) {
	t.Run("default cap rejects the 129th", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{})
		for i := range 128 {
			startTool(t, c, bg, fmt.Sprintf("t%03d", i), public, reply(""))
		}
		_, err := c.StartTool(bg, catalog.Tool{Name: "t128"}, public, reply(""))
		assert.ErrorIs(t, err, catalog.ErrCapReached)
	})
	t.Run("raised cap admits 150", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{MaxTools: 150})
		for i := range 150 {
			startTool(t, c, bg, fmt.Sprintf("t%03d", i), public, reply(""))
		}
		assert.Len(t, c.Tools().List(), 150)
	})
	t.Run("takeover at full cap and a dead entry's slot", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{MaxTools: 2})
		ctxA, cancelA := context.WithCancel(bg)
		a := startTool(t, c, ctxA, "a", public, reply(""))
		ctxB, cancelB := context.WithCancel(bg)
		b := startTool(t, c, ctxB, "b", public, reply(""))
		_, err := c.StartTool(bg, catalog.Tool{Name: "c"}, public, reply(""))
		require.ErrorIs(t, err, catalog.ErrCapReached)

		cancelA()
		<-a.Done()
		startTool(t, c, bg, "a", public, reply("a2"))
		assert.Equal(t, 2, c.Stats().ToolSlots, "the takeover used A's slot")

		cancelB()
		<-b.Done()
		startTool(t, c, bg, "c", public, reply(""))
		assert.ElementsMatch(t, []string{"a", "c"}, toolNames(c), "B's dead entry gave up its slot")
	})
}

func TestBadConfigAndRoutes(t *testing.T) {
	for _, cfg := range []catalog.Config{{MaxTools: -1}, {MaxResources: -1}, {MissingPlan: 7}, {Authenticator: (*bindsec.StaticTokens)(nil)}} {
		_, err := catalog.New(cfg)
		assert.ErrorIs(t, err, catalog.ErrInvalidConfig, "%+v", cfg)
	}
	c := newCatalog(t, catalog.Config{})
	tests := []struct {
		name string
		tool catalog.Tool
		h    catalog.ToolHandler
		opts []catalog.StartOption
		want error
	}{
		{"bad name", catalog.Tool{Name: "no spaces"}, reply(""), nil, catalog.ErrInvalidName},
		{"nil handler", catalog.Tool{Name: "t"}, nil, nil, catalog.ErrInvalidRoute},
		{"schema not an object", catalog.Tool{Name: "t", InputSchema: json.RawMessage(`[1]`)}, reply(""), nil, catalog.ErrInvalidRoute},
		{"schema not JSON", catalog.Tool{Name: "t", InputSchema: json.RawMessage(`{`)}, reply(""), nil, catalog.ErrInvalidRoute},
		{"zero concurrent", catalog.Tool{Name: "t"}, reply(""), []catalog.StartOption{catalog.WithMaxConcurrent(0)}, catalog.ErrInvalidConfig},
		{"negative concurrent", catalog.Tool{Name: "t"}, reply(""), []catalog.StartOption{catalog.WithMaxConcurrent(-1)}, catalog.ErrInvalidConfig},
		{"negative waiting room", catalog.Tool{Name: "t"}, reply(""), []catalog.StartOption{catalog.WithMaxConcurrent(1), catalog.WithWaitingRoom(-1)}, catalog.ErrInvalidConfig},
		{"waiting room without a limit", catalog.Tool{Name: "t"}, reply(""), []catalog.StartOption{catalog.WithWaitingRoom(4)}, catalog.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := c.Version()
			k, err := c.StartTool(bg, tt.tool, public, tt.h, tt.opts...)
			assert.ErrorIs(t, err, tt.want)
			assert.Nil(t, k)
			assert.Equal(t, v, c.Version(), "a failed start changes nothing")
			assert.Zero(t, c.Stats().ToolSlots)
		})
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := c.StartTool(ctx, catalog.Tool{Name: "t"}, public, reply(""))
	assert.ErrorIs(t, err, catalog.ErrDeadOwner, "a start from a done context")
}

func TestVersionAndChangesFollowDeaths(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	changes := c.Changes()
	v0 := c.Version()
	ctx, cancel := context.WithCancel(bg)
	startTool(t, c, ctx, "tool", public, reply(""))
	<-changes
	v1 := c.Version()
	assert.Greater(t, v1, v0)

	changes = c.Changes()
	cancel()
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled after the owner died")
	}
	assert.Greater(t, c.Version(), v1, "a death is a change once observed")
	assert.Empty(t, c.Tools().List())
}

func TestListToolsIsCachedUntilChange(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "a", public, reply(""))
	startTool(t, c, bg, "b", public, reply(""))
	first := c.Tools().List()
	assert.Same(t, &first[0], &c.Tools().List()[0])
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = c.Tools().List() }))
	startTool(t, c, bg, "c", public, reply(""))
	assert.Len(t, c.Tools().List(), 3)

	page, next, err := c.Tools().Page("", 2)
	require.NoError(t, err)
	assert.Len(t, page, 2)
	page, next, err = c.Tools().Page(next, 2)
	require.NoError(t, err)
	assert.Equal(t, "c", page[0].Name)
	assert.Empty(t, next)
	_, _, err = c.Tools().Page("garbage!", 2)
	assert.ErrorIs(t, err, catalog.ErrInvalidCursor)
}

// A route whose owner registered no plan falls under the missing-plan
// mode; one whose owner did never does.
func TestWithoutPlan(t *testing.T) {
	for _, mode := range []bindsec.MissingPlanMode{bindsec.Deny, bindsec.PassThrough} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newCatalog(t, catalog.Config{MissingPlan: mode})
			k, err := c.StartTool(bg, catalog.Tool{Name: "open"}, bindsec.Plan{}, reply("ran"), catalog.WithoutPlan())
			require.NoError(t, err)
			t.Cleanup(func() { _ = k.Stop(bg) })
			text, err := callText(t, c, "open", "")
			if mode == bindsec.Deny {
				assert.ErrorIs(t, err, bindsec.ErrNoPlan)
			} else {
				require.NoError(t, err)
				assert.Equal(t, "ran", text)
			}
		})
	}
	c := newCatalog(t, catalog.Config{})
	_, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, reply(""), catalog.WithoutPlan())
	assert.ErrorIs(t, err, catalog.ErrInvalidConfig, "a plan and WithoutPlan contradict each other")
}
