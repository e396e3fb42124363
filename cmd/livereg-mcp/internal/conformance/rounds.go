package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/livereg/livereg/catalog"
)

// The fixtures of the input-required-result scenarios (SEP-2322). Each
// body asks as any body does (catalog.Ask, Call.Elicit, Call.Sample): a
// 2025-11-25 session is asked mid-call, and a 2026-07-28 client gets an
// input_required result and retries with its answers. Keys, messages and
// schemas are the suite's.

// form is an elicitation of one required property of type typ.
func form(key, message, prop, typ string) catalog.ElicitRequest {
	return catalog.ElicitRequest{Key: key, Message: message,
		Schema: []byte(`{"type":"object","properties":{"` + prop + `":{"type":"` + typ + `"}},"required":["` + prop + `"]}`)}
}

// question is a sampling request of one user message.
func question(key, text string, maxTokens int64) catalog.SampleRequest {
	return catalog.SampleRequest{Key: key, MaxTokens: maxTokens,
		Messages: []catalog.SampleMessage{{Role: catalog.RoleUser, Content: catalog.Content{Type: catalog.TypeText, Text: text}}}}
}

// value is an accepted form's property as text, or what the user did
// instead.
func value(r catalog.ElicitResult, prop string) string {
	if r.Action != catalog.ElicitAccept {
		return "(" + string(r.Action) + ")"
	}
	return fmt.Sprint(r.Content[prop])
}

func rootsText(roots []catalog.Root) string {
	uris := make([]string, len(roots))
	for i, r := range roots {
		uris[i] = r.URI
	}
	return strings.Join(uris, ", ")
}

// rounds adds them.
func (s *set) rounds() {
	s.tool(catalog.Tool{Name: "test_input_required_result_elicitation", Description: "Asks the user's name, then greets them."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Elicit(ctx, form("user_name", "What is your name?", "name", "string"))
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("Hello, " + value(r, "name") + "!"), nil
		})
	s.tool(catalog.Tool{Name: "test_input_required_result_sampling", Description: "Asks an LLM for the capital of France."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Sample(ctx, question("capital_question", "What is the capital of France?", 100))
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("LLM answered: " + r.Content.Text), nil
		})
	s.tool(catalog.Tool{Name: "test_input_required_result_list_roots", Description: "Asks for the client's roots and names them."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			a, err := catalog.Ask(ctx, catalog.InputRequest{Key: "client_roots", ListRoots: true})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("client roots: " + rootsText(a[0].Roots)), nil
		})
	// The server checks the requestState before the body runs again, and
	// an answer reaches a body only with a state that passed.
	s.tool(catalog.Tool{Name: "test_input_required_result_request_state", Description: "Asks for a confirmation; its retry carries a requestState."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Elicit(ctx, form("confirm", "Please confirm", "ok", "boolean"))
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("state-ok: confirmed " + value(r, "ok")), nil
		})
	s.tool(catalog.Tool{Name: "test_input_required_result_tampered_state", Description: "Asks for a confirmation; a tampered requestState is refused."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Elicit(ctx, form("confirm", "Please confirm", "ok", "boolean"))
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("confirmed " + value(r, "ok")), nil
		})
	s.tool(catalog.Tool{Name: "test_input_required_result_multiple_inputs", Description: "Asks for a name, a greeting and the roots at once."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			greeting := question("greeting", "Generate a greeting", 50)
			a, err := catalog.Ask(ctx,
				catalog.InputRequest{Key: "user_name", Elicit: new(form("user_name", "What is your name?", "name", "string"))},
				catalog.InputRequest{Key: "greeting", Sample: &greeting},
				catalog.InputRequest{Key: "client_roots", ListRoots: true})
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(fmt.Sprintf("%s, %s (roots: %s)", a[1].Sample.Content.Text, value(a[0].Elicit, "name"), rootsText(a[2].Roots))), nil
		})
	s.tool(catalog.Tool{Name: "test_input_required_result_multi_round", Description: "Asks a name, then a favourite color, in two rounds."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			name, err := c.Elicit(ctx, form("step1", "Step 1: What is your name?", "name", "string"))
			if err != nil {
				return catalog.Result{}, err
			}
			color, err := c.Elicit(ctx, form("step2", "Step 2: What is your favorite color?", "color", "string"))
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult(value(name, "name") + " likes " + value(color, "color")), nil
		})
	// Asks by elicitation where the client offers it, by sampling where
	// it offers only that: a body never asks what the client cannot
	// answer (Ask refuses it with a CapabilityError).
	s.tool(catalog.Tool{Name: "test_input_required_result_capabilities", Description: "Asks the user's name by whatever means the client offers."},
		func(ctx context.Context, c catalog.Call) (catalog.Result, error) {
			r, err := c.Elicit(ctx, form("user_name", "What is your name?", "name", "string"))
			if errors.Is(err, catalog.ErrNotSupported) {
				s, err := c.Sample(ctx, question("user_name_guess", "Suggest a name for the user.", 20))
				if err != nil {
					return catalog.Result{}, err
				}
				return catalog.TextResult("Hello, " + s.Content.Text + "!"), nil
			}
			if err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("Hello, " + value(r, "name") + "!"), nil
		})
	s.prompt(catalog.Prompt{Name: "test_input_required_result_prompt", Description: "Asks what context to use, then gives a prompt with it."},
		func(ctx context.Context, g catalog.PromptGet) (catalog.PromptResult, error) {
			a, err := catalog.Ask(ctx, catalog.InputRequest{Key: "user_context", Elicit: new(form("user_context", "What context should the prompt use?", "context", "string"))})
			if err != nil {
				return catalog.PromptResult{}, err
			}
			return catalog.PromptResult{Messages: []catalog.PromptMessage{{Role: "user",
				Content: catalog.Content{Type: catalog.TypeText, Text: "Answer in this context: " + value(a[0].Elicit, "context")}}}}, nil
		})
	s.resource(catalog.Resource{URI: "test://input-required", Name: "input-required", Description: "Asks whose greeting to read.", MIMEType: "text/plain"},
		func(ctx context.Context, r catalog.Read) (catalog.Contents, error) {
			a, err := catalog.Ask(ctx, catalog.InputRequest{Key: "user_name", Elicit: new(form("user_name", "What is your name?", "name", "string"))})
			if err != nil {
				return catalog.Contents{}, err
			}
			return catalog.Contents{Text: "Hello, " + value(a[0].Elicit, "name") + "!"}, nil
		})
}
