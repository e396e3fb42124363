package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
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
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopBounded(k) })
	return k
}

func callText(t testing.TB, c *catalog.Catalog, name, credential string) (string, error) {
	t.Helper()
	res, err := c.CallTool(bg, name, json.RawMessage(`{}`), credential)
	if err != nil {
		return "", err
	}
	if len(res.Content) == 0 {
		t.Fatalf("res.Content is empty")
	}
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
	eventually(t, 10*time.Second, func() bool { return !slices.Contains(toolNames(c), name) }, name+" leaves the listing")
}

func TestCallRoutesToHandler(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var got catalog.Call
	startTool(t, c, bg, "echo", public, func(_ context.Context, call catalog.Call) (catalog.Result, error) {
		got = call
		return catalog.Result{Content: []catalog.Content{{Type: "text", Text: string(call.Arguments)}}, StructuredContent: map[string]int{"n": 1}}, nil
	})
	res, err := c.CallTool(bg, "echo", json.RawMessage(`{"x":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != `{"x":1}` {
		t.Errorf("res.Content[0].Text = %q, want `{\"x\":1}`", res.Content[0].Text)
	}
	if want := (map[string]int{"n": 1}); !reflect.DeepEqual(res.StructuredContent, want) {
		t.Errorf("res.StructuredContent = %v, want %v", res.StructuredContent, want)
	}
	if got.Name != "echo" {
		t.Errorf("got.Name = %q, want \"echo\"", got.Name)
	}

	handlerErr := errors.New("tool failed")
	startTool(t, c, bg, "fails", public, func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.Result{}, handlerErr })
	_, err = c.CallTool(bg, "fails", nil, "")
	if !errors.Is(err, handlerErr) {
		t.Errorf("a handler's error reaches the caller unchanged: err = %v, want %v", err, handlerErr)
	}
}

func TestStoppedToolIsUnknown(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var runs atomic.Int32
	k := startTool(t, c, bg, "tool", public, func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.TextResult("ok"), nil
	})
	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	if err := k.Stop(bg); err != nil {
		t.Fatalf("a second Stop is a no-op: %v", err)
	}

	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "tool", nil, "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("err = %v, want catalog.ErrNotFound", err)
	}
	if err := ctx.Err(); err != nil {
		t.Errorf("the call must fail at once, not wait on a dead channel: %v", err)
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("runs.Load() = %v, want 0", got)
	}
	if len(c.Tools().List()) != 0 {
		t.Errorf("c.Tools().List() = %v, want empty", c.Tools().List())
	}
	if got := c.Stats().ToolSlots; got != 0 {
		t.Errorf("c.Stats().ToolSlots = %v, want 0", got)
	}
}

// dropConsumer starts a consumer and returns nothing that keeps it.
//
//go:noinline
func dropConsumer(t *testing.T, c *catalog.Catalog, name string) <-chan struct{} {
	k, err := c.StartTool(bg, catalog.Tool{Name: name}, public, reply("old"))
	if err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Stop(bg); err != nil {
				t.Fatal(err)
			}
			return k.Done()
		}},
		{"context cancel", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			ctx, cancel := context.WithCancel(bg)
			k, err := c.StartTool(ctx, catalog.Tool{Name: "tool"}, public, reply("old"))
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			return k.Done()
		}},
		{"panic", func(t *testing.T, c *catalog.Catalog) <-chan struct{} {
			k, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
				panic("route body bug")
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CallTool(bg, "tool", nil, "")
			if !errors.Is(err, catalog.ErrRoutePanicked) {
				t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
			}
			if got := err.Error(); !strings.Contains(got, "route body bug") {
				t.Errorf("err.Error() = %q, want it to contain %q", got, "route body bug")
			}
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
			if err != nil {
				t.Fatal(err)
			}
			if text != "new" {
				t.Errorf("text = %q, want \"new\"", text)
			}
			if got, want := toolNames(c), ([]string{"tool"}); !reflect.DeepEqual(got, want) {
				t.Errorf("toolNames(c) = %v, want %v", got, want)
			}
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
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		cancel()
		<-k.Done()
	}
	awaitGone(t, c, "tool")
	if got := c.Stats().ToolSlots; got != 0 {
		t.Errorf("c.Stats().ToolSlots = %v, want 0", got)
	}
}

func TestLiveDuplicateAndLateStop(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-b": bindsec.NewPrincipal("b", "b"),
	})})
	ctxA, cancelA := context.WithCancel(bg)
	a := startTool(t, c, ctxA, "tool", public, reply("a"))

	_, err := c.StartTool(bg, catalog.Tool{Name: "tool"}, bindsec.Plan{Roles: []string{"x"}}, reply("dup"))
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}
	if got := err.Error(); !strings.Contains(got, `"tool"`) {
		t.Errorf("the error names the route: err.Error() = %q, want it to contain %q", got, `"tool"`)
	}
	text, err := callText(t, c, "tool", "")
	if err != nil {
		t.Fatalf("the failed duplicate must leave A's public plan in force: %v", err)
	}
	if text != "a" {
		t.Errorf("text = %q, want \"a\"", text)
	}

	cancelA()
	<-a.Done()
	startTool(t, c, bg, "tool", bindsec.Plan{Roles: []string{"b"}}, reply("b"))
	if err := a.Stop(bg); err != nil {
		t.Fatalf("A's late stop: %v", err)
	}

	text, err = callText(t, c, "tool", "tok-b")
	if err != nil {
		t.Fatalf("B's entry survives A's late stop: %v", err)
	}
	if text != "b" {
		t.Errorf("text = %q, want \"b\"", text)
	}
	_, err = callText(t, c, "tool", "")
	if !errors.Is(err, bindsec.ErrUnauthenticated) {
		t.Errorf("B's plan survives A's late stop: err = %v, want bindsec.ErrUnauthenticated", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.StartResource(bg, catalog.Resource{URI: "file:///a", Name: "a"}, public, reader)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(bg) })

	var uris []string
	for _, r := range c.Resources().List() {
		uris = append(uris, r.URI)
	}
	if want := ([]string{"file:///a", "test://doc"}); !reflect.DeepEqual(uris, want) {
		t.Errorf("uris = %v, want %v", uris, want)
	}

	got, err := c.ReadResource(bg, "test://doc", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (catalog.Contents{URI: "test://doc", MIMEType: "text/plain", Text: "contents of test://doc"}); !reflect.DeepEqual(got, want) {
		t.Errorf("got = %v, want %v", got, want)
	}

	before := reads.Load()
	_, err = c.ReadResource(bg, "test://missing", "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("err = %v, want catalog.ErrNotFound", err)
	}
	if got := reads.Load(); got != before {
		t.Errorf("an unknown URI runs no body: reads.Load() = %v, want %v", got, before)
	}
	_, err = c.StartResource(bg, catalog.Resource{URI: "relative/path"}, public, reader)
	if !errors.Is(err, catalog.ErrInvalidName) {
		t.Errorf("err = %v, want catalog.ErrInvalidName", err)
	}

	// A stopped route: a clean error, and its body never runs.
	if err := other.Stop(bg); err != nil {
		t.Fatal(err)
	}
	before = reads.Load()
	_, err = c.ReadResource(bg, "file:///a", "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("err = %v, want catalog.ErrNotFound", err)
	}
	if got := reads.Load(); got != before {
		t.Errorf("a stopped route's body never runs: reads.Load() = %v, want %v", got, before)
	}

	cancel()
	<-k.Done()
	before = reads.Load()
	_, err = c.ReadResource(bg, "test://doc", "")
	if !(errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone)) {
		t.Errorf("got %v: errors.Is(err, catalog.ErrNotFound) || errors.Is(err, catalog.ErrRouteGone) is false", err)
	}
	if got := reads.Load(); got != before {
		t.Errorf("a dead route's body never runs: reads.Load() = %v, want %v", got, before)
	}

	k2, err := c.StartResource(bg, catalog.Resource{URI: "test://doc"}, public, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: "new"}, nil
	})
	if err != nil {
		t.Fatalf("a dead owner's URI is taken over: %v", err)
	}
	t.Cleanup(func() { _ = k2.Stop(bg) })
	got, err = c.ReadResource(bg, "test://doc", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "new" {
		t.Errorf("got.Text = %q, want \"new\"", got.Text)
	}
}

func TestStartingToolIsNotListedOrCallable(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var runs, hooked atomic.Int32
	c.SetBeforeReadyHook(func(name string) {
		hooked.Add(1)
		if got := toolNames(c); slices.Contains(got, name) {
			t.Errorf("listed while starting: toolNames(c) = %q, want it not to contain %q", got, name)
		}
		_, err := c.CallTool(bg, name, nil, "")
		if !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("callable while starting: err = %v, want catalog.ErrNotFound", err)
		}
		if got := c.Stats().ToolSlots; got != 1 {
			t.Errorf("it holds its slot while starting: c.Stats().ToolSlots = %v, want 1", got)
		}
	})
	startTool(t, c, bg, "tool", public, func(context.Context, catalog.Call) (catalog.Result, error) {
		runs.Add(1)
		return catalog.Result{}, nil
	})
	c.SetBeforeReadyHook(nil)
	if got := hooked.Load(); got != int32(1) {
		t.Fatalf("the start passed through its starting window: hooked.Load() = %v, want int32(1)", got)
	}
	if got := runs.Load(); got != 0 {
		t.Errorf("runs.Load() = %v, want 0", got)
	}
	if got, want := toolNames(c), ([]string{"tool"}); !reflect.DeepEqual(got, want) {
		t.Errorf("toolNames(c) = %v, want %v", got, want)
	}
}

func TestCap(t *testing.T) {
	t.Run("default cap rejects the 129th", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{})
		for i := range 128 {
			startTool(t, c, bg, fmt.Sprintf("t%03d", i), public, reply(""))
		}
		_, err := c.StartTool(bg, catalog.Tool{Name: "t128"}, public, reply(""))
		if !errors.Is(err, catalog.ErrCapReached) {
			t.Errorf("err = %v, want catalog.ErrCapReached", err)
		}
	})
	t.Run("raised cap admits 150", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{MaxTools: 150})
		for i := range 150 {
			startTool(t, c, bg, fmt.Sprintf("t%03d", i), public, reply(""))
		}
		if got := len(c.Tools().List()); got != 150 {
			t.Errorf("len(c.Tools().List()) = %d, want %d", got, 150)
		}
	})
	t.Run("takeover at full cap and a dead entry's slot", func(t *testing.T) {
		c := newCatalog(t, catalog.Config{MaxTools: 2})
		ctxA, cancelA := context.WithCancel(bg)
		a := startTool(t, c, ctxA, "a", public, reply(""))
		ctxB, cancelB := context.WithCancel(bg)
		b := startTool(t, c, ctxB, "b", public, reply(""))
		_, err := c.StartTool(bg, catalog.Tool{Name: "c"}, public, reply(""))
		if !errors.Is(err, catalog.ErrCapReached) {
			t.Fatalf("err = %v, want catalog.ErrCapReached", err)
		}

		cancelA()
		<-a.Done()
		startTool(t, c, bg, "a", public, reply("a2"))
		if got := c.Stats().ToolSlots; got != 2 {
			t.Errorf("the takeover used A's slot: c.Stats().ToolSlots = %v, want 2", got)
		}

		cancelB()
		<-b.Done()
		startTool(t, c, bg, "c", public, reply(""))
		if got := slices.Sorted(slices.Values(toolNames(c))); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("B's dead entry gave up its slot: tools listed = %v, want [a c]", got)
		}
	})
}

func TestBadConfigAndRoutes(t *testing.T) {
	for _, cfg := range []catalog.Config{{MaxTools: -1}, {MaxResources: -1}, {MissingPlan: 7}, {Authenticator: (*bindsec.StaticTokens)(nil)}} {
		_, err := catalog.New(cfg)
		if !errors.Is(err, catalog.ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want catalog.ErrInvalidConfig", cfg, err)
		}
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
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if k != nil {
				t.Errorf("k = %v, want nil", k)
			}
			if got := c.Version(); got != v {
				t.Errorf("a failed start changes nothing: c.Version() = %v, want %v", got, v)
			}
			if got := c.Stats().ToolSlots; got != 0 {
				t.Errorf("c.Stats().ToolSlots = %v, want 0", got)
			}
		})
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := c.StartTool(ctx, catalog.Tool{Name: "t"}, public, reply(""))
	if !errors.Is(err, catalog.ErrDeadOwner) {
		t.Errorf("a start from a done context: err = %v, want catalog.ErrDeadOwner", err)
	}
}

func TestVersionAndChangesFollowDeaths(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	changes := c.Changes()
	v0 := c.Version()
	ctx, cancel := context.WithCancel(bg)
	startTool(t, c, ctx, "tool", public, reply(""))
	<-changes
	v1 := c.Version()
	if v1 <= v0 {
		t.Errorf("v1 = %v, want > %v", v1, v0)
	}

	changes = c.Changes()
	cancel()
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled after the owner died")
	}
	if got := c.Version(); got <= v1 {
		t.Errorf("a death is a change once observed: c.Version() = %v, want > %v", got, v1)
	}
	if len(c.Tools().List()) != 0 {
		t.Errorf("c.Tools().List() = %v, want empty", c.Tools().List())
	}
}

func TestListToolsIsCachedUntilChange(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "a", public, reply(""))
	startTool(t, c, bg, "b", public, reply(""))
	first := c.Tools().List()
	if &first[0] != &c.Tools().List()[0] {
		t.Errorf("&c.Tools().List()[0] is not the same pointer as &first[0]")
	}
	if got := testing.AllocsPerRun(100, func() { _ = c.Tools().List() }); got != 0 {
		t.Errorf("testing.AllocsPerRun(100, func() { _ = c.Tools().List() }) = %v, want 0", got)
	}
	startTool(t, c, bg, "c", public, reply(""))
	if got := len(c.Tools().List()); got != 3 {
		t.Errorf("len(c.Tools().List()) = %d, want %d", got, 3)
	}

	page, next, err := c.Tools().Page("", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(page); got != 2 {
		t.Errorf("len(page) = %d, want %d", got, 2)
	}
	page, next, err = c.Tools().Page(next, 2)
	if err != nil {
		t.Fatal(err)
	}
	if page[0].Name != "c" {
		t.Errorf("page[0].Name = %q, want \"c\"", page[0].Name)
	}
	if len(next) != 0 {
		t.Errorf("next = %v, want empty", next)
	}
	_, _, err = c.Tools().Page("garbage!", 2)
	if !errors.Is(err, catalog.ErrInvalidCursor) {
		t.Errorf("err = %v, want catalog.ErrInvalidCursor", err)
	}
}

// A route whose owner registered no plan falls under the missing-plan
// mode; one whose owner did never does.
func TestWithoutPlan(t *testing.T) {
	for _, mode := range []bindsec.MissingPlanMode{bindsec.Deny, bindsec.PassThrough} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newCatalog(t, catalog.Config{MissingPlan: mode})
			k, err := c.StartTool(bg, catalog.Tool{Name: "open"}, bindsec.Plan{}, reply("ran"), catalog.WithoutPlan())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Stop(bg) })
			text, err := callText(t, c, "open", "")
			if mode == bindsec.Deny {
				if !errors.Is(err, bindsec.ErrNoPlan) {
					t.Errorf("err = %v, want bindsec.ErrNoPlan", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if text != "ran" {
					t.Errorf("text = %q, want \"ran\"", text)
				}
			}
		})
	}
	c := newCatalog(t, catalog.Config{})
	_, err := c.StartTool(bg, catalog.Tool{Name: "t"}, public, reply(""), catalog.WithoutPlan())
	if !errors.Is(err, catalog.ErrInvalidConfig) {
		t.Errorf("a plan and WithoutPlan contradict each other: err = %v, want catalog.ErrInvalidConfig", err)
	}
}
