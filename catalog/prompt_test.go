package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoPrompt answers one user message naming the prompt and its arguments.
func echoPrompt(ran *atomic.Int64) catalog.PromptHandler {
	return func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		if ran != nil {
			ran.Add(1)
		}
		return catalog.PromptResult{Messages: []catalog.PromptMessage{
			{Role: "user", Content: catalog.Content{Type: "text", Text: g.Name + ":" + g.Arguments["a"]}},
		}}, nil
	}
}

func startPrompt(t testing.TB, c *catalog.Catalog, ctx context.Context, p catalog.Prompt, h catalog.PromptHandler) *catalog.Consumer {
	t.Helper()
	k, err := c.StartPrompt(ctx, p, public, h)
	require.NoError(t, err)
	t.Cleanup(func() { stopBounded(k) })
	return k
}

func promptNames(c *catalog.Catalog) []string {
	var out []string
	for _, p := range c.Prompts().List() {
		out = append(out, p.Name)
	}
	return out
}

func TestStartPromptRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		cfg  catalog.Config
		p    catalog.Prompt
		h    catalog.PromptHandler
		want error
	}{
		{"duplicate argument names", catalog.Config{}, catalog.Prompt{Name: "p", Arguments: []catalog.PromptArgument{{Name: "a"}, {Name: "b"}, {Name: "a"}}}, echoPrompt(nil), catalog.ErrInvalidRoute},
		{"argument without a name", catalog.Config{}, catalog.Prompt{Name: "p", Arguments: []catalog.PromptArgument{{Name: ""}}}, echoPrompt(nil), catalog.ErrInvalidRoute},
		{"nil handler", catalog.Config{}, catalog.Prompt{Name: "p"}, nil, catalog.ErrInvalidRoute},
		{"empty name", catalog.Config{}, catalog.Prompt{Name: ""}, echoPrompt(nil), catalog.ErrInvalidName},
		{"name with a space", catalog.Config{}, catalog.Prompt{Name: "a b"}, echoPrompt(nil), catalog.ErrInvalidName},
		{"catalog without prompts", catalog.Config{MaxPrompts: -1}, catalog.Prompt{Name: "p"}, echoPrompt(nil), catalog.ErrCapReached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, tt.cfg)
			v := c.Version()
			k, err := c.StartPrompt(bg, tt.p, public, tt.h)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, k)
			st := c.Stats()
			assert.Zero(t, st.PromptSlots, "nothing is left behind")
			assert.Equal(t, v, c.Version())
		})
	}
}

func TestPromptGetListStop(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxPrompts: 2})
	var ran atomic.Int64
	p := catalog.Prompt{Name: "greet", Description: "greets", Arguments: []catalog.PromptArgument{{Name: "a", Required: true}, {Name: "b"}}}
	v := c.Prompts().Version()
	changes := c.Changes()
	k := startPrompt(t, c, bg, p, echoPrompt(&ran))
	assert.Greater(t, c.Prompts().Version(), v, "a start moves the version")
	select {
	case <-changes:
	default:
		t.Fatal("a start signals Changes")
	}
	require.Equal(t, []catalog.Prompt{p}, c.Prompts().List())

	res, err := c.GetPrompt(bg, "greet", map[string]string{"a": "x"}, "")
	require.NoError(t, err)
	assert.Equal(t, "greet:x", res.Messages[0].Content.Text)

	_, err = c.GetPrompt(bg, "greet", map[string]string{"b": "x"}, "")
	require.ErrorIs(t, err, catalog.ErrInvalidArguments, "a required argument is missing")
	assert.EqualValues(t, 1, ran.Load(), "the handler did not run for it")

	_, err = c.StartPrompt(bg, catalog.Prompt{Name: "greet"}, public, echoPrompt(nil))
	require.ErrorIs(t, err, catalog.ErrDuplicate)
	startPrompt(t, c, bg, catalog.Prompt{Name: "other"}, echoPrompt(nil))
	_, err = c.StartPrompt(bg, catalog.Prompt{Name: "third"}, public, echoPrompt(nil))
	require.ErrorIs(t, err, catalog.ErrCapReached)
	st := c.Stats()
	assert.Equal(t, 2, st.Prompts)
	assert.EqualValues(t, 1, st.Duplicates)
	assert.EqualValues(t, 1, st.CapRefusals)

	require.NoError(t, k.Stop(bg))
	_, err = c.GetPrompt(bg, "greet", nil, "")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	assert.Equal(t, []string{"other"}, promptNames(c))
	assert.EqualValues(t, 1, c.Stats().Calls.Unknown)
}

func TestPromptReclaimedOnDeath(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxPrompts: 1})
	ctx, cancel := context.WithCancel(bg)
	startPrompt(t, c, ctx, catalog.Prompt{Name: "p"}, echoPrompt(nil))
	cancel()
	require.Eventually(t, func() bool { return len(c.Prompts().List()) == 0 && c.Stats().PromptSlots == 0 },
		10*time.Second, time.Millisecond, "the dead owner's prompt is reclaimed")
	_, err := c.GetPrompt(bg, "p", nil, "")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	// The slot under the cap of one is free again, and the name too.
	startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, echoPrompt(nil))
	// A listing may reclaim the entry before the death's own reclaim
	// counts it.
	require.Eventually(t, func() bool { return c.Stats().Deaths.Cancel == 1 },
		10*time.Second, time.Millisecond, "the death is counted as a cancellation")
}

func TestPromptPanicKillsConsumer(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k := startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
		panic("boom")
	})
	_, err := c.GetPrompt(bg, "p", nil, "")
	require.ErrorIs(t, err, catalog.ErrRoutePanicked)
	waitClosed(t, k.Done(), "the death of the consumer whose body panicked")
}

// A prompt whose owner dies after the lookup, before the admission, never
// runs: the gate refuses it.
func TestPromptOwnerDiesBeforeAdmission(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	ctx, cancel := context.WithCancel(bg)
	var ran atomic.Int64
	k := startPrompt(t, c, ctx, catalog.Prompt{Name: "p"}, echoPrompt(&ran))
	c.SetBeforeAdmitHook(func(string) {
		cancel()
		<-k.Done()
	})
	_, err := c.GetPrompt(bg, "p", nil, "")
	require.ErrorIs(t, err, catalog.ErrRouteGone)
	assert.Zero(t, ran.Load())
}

func TestPromptPlanBinding(t *testing.T) {
	c := newCatalog(t, catalog.Config{Authenticator: bindsec.NewStaticTokens(map[string]bindsec.Principal{
		"tok-a": bindsec.NewPrincipal("alice", "admin"),
		"tok-b": bindsec.NewPrincipal("bob"),
	})})
	var who atomic.Value
	k, err := c.StartPrompt(bg, catalog.Prompt{Name: "p"}, bindsec.Plan{Roles: []string{"admin"}},
		func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			who.Store(g.Principal.Subject())
			return catalog.PromptResult{}, nil
		})
	require.NoError(t, err)
	defer func() { _ = k.Stop(bg) }()
	for _, tt := range []struct {
		cred string
		ok   bool
	}{{"tok-a", true}, {"tok-b", false}, {"", false}, {"nope", false}} {
		_, err := c.GetPrompt(bg, "p", nil, tt.cred)
		if tt.ok {
			require.NoError(t, err)
			assert.Equal(t, "alice", who.Load())
		} else {
			require.True(t, catalog.Denied(err), "credential %q: %v", tt.cred, err)
		}
	}
}

func TestPromptInvalidRole(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "system"}}}, nil
	})
	_, err := c.GetPrompt(bg, "p", nil, "")
	require.ErrorIs(t, err, catalog.ErrInvalidResult)
	assert.False(t, errors.Is(err, catalog.ErrRoutePanicked))
}

func TestPromptsPage(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	for _, n := range []string{"c", "a", "b"} {
		startPrompt(t, c, bg, catalog.Prompt{Name: n}, echoPrompt(nil))
	}
	var got []string
	cursor := ""
	for {
		ps, next, err := c.Prompts().Page(cursor, 2)
		require.NoError(t, err)
		for _, p := range ps {
			got = append(got, p.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, []string{"a", "b", "c"}, got)
	_, _, err := c.Prompts().Page("garbage", 2)
	require.ErrorIs(t, err, catalog.ErrInvalidCursor)
}

func ExampleCatalog_StartPrompt() {
	cat, _ := catalog.New(catalog.Config{})
	k, err := cat.StartPrompt(context.Background(), catalog.Prompt{
		Name:      "greet",
		Arguments: []catalog.PromptArgument{{Name: "who", Required: true}},
	}, bindsec.Plan{Public: true}, func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{
			{Role: "user", Content: catalog.Content{Type: "text", Text: "Say hello to " + g.Arguments["who"] + "."}},
		}}, nil
	})
	if err != nil {
		panic(err)
	}
	defer k.Stop(context.Background())

	res, err := cat.GetPrompt(context.Background(), "greet", map[string]string{"who": "Ada"}, "")
	fmt.Println(res.Messages[0].Content.Text, err)
	_, err = cat.GetPrompt(context.Background(), "greet", nil, "")
	fmt.Println(errors.Is(err, catalog.ErrInvalidArguments))
	// Output:
	// Say hello to Ada. <nil>
	// true
}
