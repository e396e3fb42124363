package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
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
	if err != nil {
		t.Fatal(err)
	}
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
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if k != nil {
				t.Errorf("k = %v, want nil", k)
			}
			st := c.Stats()
			if st.PromptSlots != 0 {
				t.Errorf("nothing is left behind: st.PromptSlots = %v, want 0", st.PromptSlots)
			}
			if got := c.Version(); got != v {
				t.Errorf("c.Version() = %v, want %v", got, v)
			}
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
	if got := c.Prompts().Version(); got <= v {
		t.Errorf("a start moves the version: c.Prompts().Version() = %v, want > %v", got, v)
	}
	select {
	case <-changes:
	default:
		t.Fatal("a start signals Changes")
	}
	if got, want := c.Prompts().List(), ([]catalog.Prompt{p}); !reflect.DeepEqual(got, want) {
		t.Fatalf("c.Prompts().List() = %v, want %v", got, want)
	}

	res, err := c.GetPrompt(bg, "greet", map[string]string{"a": "x"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages[0].Content.Text != "greet:x" {
		t.Errorf("res.Messages[0].Content.Text = %q, want \"greet:x\"", res.Messages[0].Content.Text)
	}

	_, err = c.GetPrompt(bg, "greet", map[string]string{"b": "x"}, "")
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("a required argument is missing: err = %v, want catalog.ErrInvalidArguments", err)
	}
	if got := ran.Load(); got != int64(1) {
		t.Errorf("the handler did not run for it: ran.Load() = %v, want %v", got, int64(1))
	}

	_, err = c.StartPrompt(bg, catalog.Prompt{Name: "greet"}, public, echoPrompt(nil))
	if !errors.Is(err, catalog.ErrDuplicate) {
		t.Fatalf("err = %v, want catalog.ErrDuplicate", err)
	}
	startPrompt(t, c, bg, catalog.Prompt{Name: "other"}, echoPrompt(nil))
	_, err = c.StartPrompt(bg, catalog.Prompt{Name: "third"}, public, echoPrompt(nil))
	if !errors.Is(err, catalog.ErrCapReached) {
		t.Fatalf("err = %v, want catalog.ErrCapReached", err)
	}
	st := c.Stats()
	if st.Prompts != 2 {
		t.Errorf("st.Prompts = %v, want 2", st.Prompts)
	}
	if st.Duplicates != uint64(1) {
		t.Errorf("st.Duplicates = %v, want %v", st.Duplicates, uint64(1))
	}
	if st.CapRefusals != uint64(1) {
		t.Errorf("st.CapRefusals = %v, want %v", st.CapRefusals, uint64(1))
	}

	if err := k.Stop(bg); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPrompt(bg, "greet", nil, "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}
	if got, want := promptNames(c), ([]string{"other"}); !reflect.DeepEqual(got, want) {
		t.Errorf("promptNames(c) = %v, want %v", got, want)
	}
	if got := c.Stats().Calls.Unknown; got != uint64(1) {
		t.Errorf("c.Stats().Calls.Unknown = %v, want %v", got, uint64(1))
	}
}

func TestPromptReclaimedOnDeath(t *testing.T) {
	c := newCatalog(t, catalog.Config{MaxPrompts: 1})
	ctx, cancel := context.WithCancel(bg)
	startPrompt(t, c, ctx, catalog.Prompt{Name: "p"}, echoPrompt(nil))
	cancel()
	eventually(t, 10*time.Second, func() bool { return len(c.Prompts().List()) == 0 && c.Stats().PromptSlots == 0 }, "the dead owner's prompt is reclaimed")
	_, err := c.GetPrompt(bg, "p", nil, "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}
	// The slot under the cap of one is free again, and the name too.
	startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, echoPrompt(nil))
	// A listing may reclaim the entry before the death's own reclaim
	// counts it.
	eventually(t, 10*time.Second, func() bool { return c.Stats().Deaths.Cancel == 1 }, "the death is counted as a cancellation")
}

func TestPromptPanicKillsConsumer(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	k := startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
		panic("boom")
	})
	_, err := c.GetPrompt(bg, "p", nil, "")
	if !errors.Is(err, catalog.ErrRoutePanicked) {
		t.Fatalf("err = %v, want catalog.ErrRoutePanicked", err)
	}
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
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if got := ran.Load(); got != 0 {
		t.Errorf("ran.Load() = %v, want 0", got)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(bg) }()
	for _, tt := range []struct {
		cred string
		ok   bool
	}{{"tok-a", true}, {"tok-b", false}, {"", false}, {"nope", false}} {
		_, err := c.GetPrompt(bg, "p", nil, tt.cred)
		if tt.ok {
			if err != nil {
				t.Fatal(err)
			}
			if got := who.Load(); !reflect.DeepEqual(got, "alice") {
				t.Errorf("who.Load() = %v, want \"alice\"", got)
			}
		} else {
			if !catalog.Denied(err) {
				t.Fatalf("credential %q: %v: catalog.Denied(err) is false", tt.cred, err)
			}
		}
	}
}

func TestPromptInvalidRole(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startPrompt(t, c, bg, catalog.Prompt{Name: "p"}, func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "system"}}}, nil
	})
	_, err := c.GetPrompt(bg, "p", nil, "")
	if !errors.Is(err, catalog.ErrInvalidResult) {
		t.Fatalf("err = %v, want catalog.ErrInvalidResult", err)
	}
	if errors.Is(err, catalog.ErrRoutePanicked) {
		t.Errorf("errors.Is(err, catalog.ErrRoutePanicked) is true")
	}
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
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			got = append(got, p.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if want := ([]string{"a", "b", "c"}); !reflect.DeepEqual(got, want) {
		t.Errorf("got = %v, want %v", got, want)
	}
	_, _, err := c.Prompts().Page("garbage", 2)
	if !errors.Is(err, catalog.ErrInvalidCursor) {
		t.Fatalf("err = %v, want catalog.ErrInvalidCursor", err)
	}
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
