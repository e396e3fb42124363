package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
)

// prefixes completes from words, by prefix.
func prefixes(ran *atomic.Int64, words ...string) catalog.Completer {
	return func(_ context.Context, r catalog.CompletionRequest) (catalog.Completion, error) {
		ran.Add(1)
		var out []string
		for _, w := range words {
			if strings.HasPrefix(w, r.Value) {
				out = append(out, w)
			}
		}
		return catalog.Completion{Values: out, Total: len(out)}, nil
	}
}

func TestCompletePrompt(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartPrompt(ctx, catalog.Prompt{Name: "city", Arguments: []catalog.PromptArgument{{Name: "name"}}}, public,
		echoPrompt(nil), catalog.WithCompleter(prefixes(&ran, "paris", "park", "rome")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "name", Value: "par"})
	if err != nil {
		t.Fatal(err)
	}
	if want := ([]string{"paris", "park"}); !reflect.DeepEqual(got.Values, want) {
		t.Errorf("got.Values = %v, want %v", got.Values, want)
	}

	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "nope", Value: "p"})
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
	}
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "town", Argument: "name", Value: "p"})
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}

	cancel()
	<-k.Done()
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "name", Value: "p"})
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the completer died with its consumer: err = %v, want catalog.ErrNotFound", err)
	}
	if got := ran.Load(); got != int64(1) {
		t.Errorf("ran.Load() = %v, want %v", got, int64(1))
	}
}

func TestCompleteWithoutCompleterAndCut(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startPrompt(t, c, bg, catalog.Prompt{Name: "plain", Arguments: []catalog.PromptArgument{{Name: "a"}}}, echoPrompt(nil))
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "plain", Argument: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Values) != 0 {
		t.Errorf("got.Values = %v, want empty", got.Values)
	}

	var words []string
	for i := range 150 {
		words = append(words, fmt.Sprintf("w%03d", i))
	}
	var ran atomic.Int64
	k, err := c.StartPrompt(bg, catalog.Prompt{Name: "many", Arguments: []catalog.PromptArgument{{Name: "a"}}}, public,
		echoPrompt(nil), catalog.WithCompleter(prefixes(&ran, words...)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Stop(bg) }()
	got, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "many", Argument: "a", Value: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(got.Values); got != catalog.MaxCompletionValues {
		t.Errorf("len(got.Values) = %d, want %d", got, catalog.MaxCompletionValues)
	}
	if !got.HasMore {
		t.Errorf("got.HasMore is false")
	}
	if got.Total != 150 {
		t.Errorf("got.Total = %v, want 150", got.Total)
	}
}

func TestCompleteTemplate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://c/{id}"}, public, tag("c", nil),
		catalog.WithCompleter(prefixes(&ran, "10", "11", "20")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "id", Value: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := ([]string{"10", "11"}); !reflect.DeepEqual(got.Values, want) {
		t.Errorf("got.Values = %v, want %v", got.Values, want)
	}
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{other}", Argument: "other", Value: "1"})
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the template as listed, variable names included: err = %v, want catalog.ErrNotFound", err)
	}
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "x", Value: "1"})
	if !errors.Is(err, catalog.ErrInvalidArguments) {
		t.Fatalf("err = %v, want catalog.ErrInvalidArguments", err)
	}
	cancel()
	<-k.Done()
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "id", Value: "1"})
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("err = %v, want catalog.ErrNotFound", err)
	}
	if got := ran.Load(); got != int64(1) {
		t.Errorf("ran.Load() = %v, want %v", got, int64(1))
	}
}

// A completion whose route's owner dies after the lookup never runs the
// completer: the gate refuses it.
func TestCompleteOwnerDiesBeforeAdmission(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartPrompt(ctx, catalog.Prompt{Name: "p", Arguments: []catalog.PromptArgument{{Name: "a"}}}, public,
		echoPrompt(nil), catalog.WithCompleter(prefixes(&ran, "x")))
	if err != nil {
		t.Fatal(err)
	}
	c.SetBeforeAdmitHook(func(string) {
		cancel()
		<-k.Done()
	})
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "p", Argument: "a"})
	if !errors.Is(err, catalog.ErrRouteGone) {
		t.Fatalf("err = %v, want catalog.ErrRouteGone", err)
	}
	if got := ran.Load(); got != 0 {
		t.Errorf("ran.Load() = %v, want 0", got)
	}
}

func TestWithCompleterNil(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	_, err := c.StartPrompt(bg, catalog.Prompt{Name: "p"}, public, echoPrompt(nil), catalog.WithCompleter(nil))
	if !errors.Is(err, catalog.ErrInvalidConfig) {
		t.Fatalf("err = %v, want catalog.ErrInvalidConfig", err)
	}
	if got := c.Stats().PromptSlots; got != 0 {
		t.Errorf("c.Stats().PromptSlots = %v, want 0", got)
	}
}

// Tools and resources have nothing to complete: Complete refuses their
// kinds, and an unknown one, before any lookup.
func TestCompleteRefusesOtherKinds(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "city", public, reply(""))
	for _, k := range []catalog.Kind{catalog.KindTool, catalog.KindResource, ""} {
		_, err := c.Complete(bg, catalog.CompletionRequest{Kind: k, Name: "city", Argument: "name"})
		if !errors.Is(err, catalog.ErrInvalidArguments) {
			t.Errorf("kind %q: err = %v, want catalog.ErrInvalidArguments", k, err)
		}
	}
}
