package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/livereg/livereg/catalog"
)

// completionWords are what the completer of test_prompt_with_arguments
// suggests from.
var completionWords = []string{"paris", "park", "party", "test", "testing", "testValue1", "testValue2"}

// surface adds the prompts, resource template and watched resource of the
// conformance suite's scenarios prompts-*, resources-templates-read,
// resources-subscribe, resources-unsubscribe and completion-complete.
func (s *set) surface() {
	user := func(c catalog.Content) catalog.PromptMessage { return catalog.PromptMessage{Role: "user", Content: c} }
	text := func(t string) catalog.Content { return catalog.Content{Type: "text", Text: t} }
	fixed := func(p catalog.Prompt, msgs ...catalog.PromptMessage) {
		s.prompt(p, func(context.Context, catalog.PromptGet) (catalog.PromptResult, error) {
			return catalog.PromptResult{Messages: msgs}, nil
		})
	}
	fixed(catalog.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments."},
		user(text("This is a simple prompt for testing.")))
	s.prompt(catalog.Prompt{
		Name: "test_prompt_with_arguments", Description: "A prompt with two required arguments.",
		Arguments: []catalog.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		},
	}, func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{
			user(text(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", g.Arguments["arg1"], g.Arguments["arg2"]))),
		}}, nil
	}, catalog.WithCompleter(func(_ context.Context, r catalog.CompletionRequest) (catalog.Completion, error) {
		var out []string
		for _, w := range completionWords {
			if strings.HasPrefix(w, r.Value) {
				out = append(out, w)
			}
		}
		return catalog.Completion{Values: out, Total: len(out)}, nil
	}))
	s.prompt(catalog.Prompt{
		Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds a resource.",
		Arguments: []catalog.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}},
	}, func(_ context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
		return catalog.PromptResult{Messages: []catalog.PromptMessage{
			user(catalog.Content{Type: "resource", Resource: &catalog.Contents{
				URI: g.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
			}}),
			user(text("Please process the embedded resource above.")),
		}}, nil
	})
	fixed(catalog.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image."},
		user(catalog.Content{Type: "image", Data: redPixelPNG, MIMEType: "image/png"}),
		user(text("Please analyze the image above.")))
	s.template(catalog.ResourceTemplate{
		URITemplate: "test://template/{id}/data", Name: "template-data", MIMEType: "application/json",
		Description: "Data for an ID, from a template.",
	}, func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
		id := r.Vars["id"]
		b, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		return catalog.Contents{Text: string(b)}, err
	})
	s.resource(catalog.Resource{
		URI: "test://watched-resource", Name: "watched-resource", MIMEType: "text/plain",
		Description: "A resource to subscribe to.",
	}, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{MIMEType: "text/plain", Text: "Watched resource content."}, nil
	})
}
