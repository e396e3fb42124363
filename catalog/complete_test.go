package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livereg/livereg/catalog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "name", Value: "par"})
	require.NoError(t, err)
	assert.Equal(t, []string{"paris", "park"}, got.Values)

	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "nope", Value: "p"})
	require.ErrorIs(t, err, catalog.ErrInvalidArguments)
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "town", Argument: "name", Value: "p"})
	require.ErrorIs(t, err, catalog.ErrNotFound)

	cancel()
	<-k.Done()
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "city", Argument: "name", Value: "p"})
	require.ErrorIs(t, err, catalog.ErrNotFound, "the completer died with its consumer")
	assert.EqualValues(t, 1, ran.Load())
}

func TestCompleteWithoutCompleterAndCut(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startPrompt(t, c, bg, catalog.Prompt{Name: "plain", Arguments: []catalog.PromptArgument{{Name: "a"}}}, echoPrompt(nil))
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "plain", Argument: "a"})
	require.NoError(t, err)
	assert.Empty(t, got.Values)

	var words []string
	for i := range 150 {
		words = append(words, fmt.Sprintf("w%03d", i))
	}
	var ran atomic.Int64
	k, err := c.StartPrompt(bg, catalog.Prompt{Name: "many", Arguments: []catalog.PromptArgument{{Name: "a"}}}, public,
		echoPrompt(nil), catalog.WithCompleter(prefixes(&ran, words...)))
	require.NoError(t, err)
	defer func() { _ = k.Stop(bg) }()
	got, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "many", Argument: "a", Value: "w"})
	require.NoError(t, err)
	assert.Len(t, got.Values, catalog.MaxCompletionValues)
	assert.True(t, got.HasMore)
	assert.Equal(t, 150, got.Total)
}

func TestCompleteTemplate(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartResourceTemplate(ctx, catalog.ResourceTemplate{URITemplate: "test://c/{id}"}, public, tag("c", nil),
		catalog.WithCompleter(prefixes(&ran, "10", "11", "20")))
	require.NoError(t, err)
	got, err := c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "id", Value: "1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"10", "11"}, got.Values)
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{other}", Argument: "other", Value: "1"})
	require.ErrorIs(t, err, catalog.ErrNotFound, "the template as listed, variable names included")
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "x", Value: "1"})
	require.ErrorIs(t, err, catalog.ErrInvalidArguments)
	cancel()
	<-k.Done()
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: "test://c/{id}", Argument: "id", Value: "1"})
	require.ErrorIs(t, err, catalog.ErrNotFound)
	assert.EqualValues(t, 1, ran.Load())
}

// A completion whose route's owner dies after the lookup never runs the
// completer: the gate refuses it.
func TestCompleteOwnerDiesBeforeAdmission(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	var ran atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	k, err := c.StartPrompt(ctx, catalog.Prompt{Name: "p", Arguments: []catalog.PromptArgument{{Name: "a"}}}, public,
		echoPrompt(nil), catalog.WithCompleter(prefixes(&ran, "x")))
	require.NoError(t, err)
	c.SetBeforeAdmitHook(func(string) {
		cancel()
		<-k.Done()
	})
	_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindPrompt, Name: "p", Argument: "a"})
	require.ErrorIs(t, err, catalog.ErrRouteGone)
	assert.Zero(t, ran.Load())
}

func TestWithCompleterNil(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	_, err := c.StartPrompt(bg, catalog.Prompt{Name: "p"}, public, echoPrompt(nil), catalog.WithCompleter(nil))
	require.ErrorIs(t, err, catalog.ErrInvalidConfig)
	assert.Zero(t, c.Stats().PromptSlots)
}

// Tools and resources have nothing to complete: Complete refuses their
// kinds, and an unknown one, before any lookup.
func TestCompleteRefusesOtherKinds(t *testing.T) {
	c := newCatalog(t, catalog.Config{})
	startTool(t, c, bg, "city", public, reply(""))
	for _, k := range []catalog.Kind{catalog.KindTool, catalog.KindResource, ""} {
		_, err := c.Complete(bg, catalog.CompletionRequest{Kind: k, Name: "city", Argument: "name"})
		assert.ErrorIs(t, err, catalog.ErrInvalidArguments, "kind %q", k)
	}
}
