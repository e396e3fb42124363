package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// maxCompletionValues is the most values a completion answers with, as the
// MCP specification bounds it; a Completer's extra values are cut, and
// HasMore set.
const maxCompletionValues = 100

// CompletionRequest is one completion/complete: which prompt or template,
// which of its arguments or variables, and what the user typed so far. A
// caller fills in the fields down to Credential and passes it to
// Catalog.Complete; the route's Completer gets it with Credential cleared
// and Principal and Owner filled in.
type CompletionRequest struct {
	// Kind is KindPrompt or KindTemplate.
	Kind Kind
	// Name is the prompt's name, or the template's URI template as listed.
	Name string
	// Argument is the prompt's argument, or the template's variable.
	Argument string
	Value    string
	// Context holds the other arguments' values, if the client sent them.
	// Read-only.
	Context map[string]string
	// Credential is a bearer token without its prefix; "" for none. The
	// completer never sees it.
	Credential string
	// Principal and Owner are as in Call: whom the credential proved, and
	// the route's owner. Complete sets them; a caller's values are
	// ignored.
	Principal bindsec.Principal
	Owner     owner.Ref
}

// Completion is a Completer's answer: suggested values, best first (at
// most 100, as the MCP specification bounds them; more are cut, and HasMore
// set); Total,
// if known, counts all the values there are; HasMore says there are more
// than Values holds.
type Completion struct {
	Values  []string
	Total   int
	HasMore bool
}

// Completer suggests values for a prompt's argument or a template's
// variable. It belongs to the consumer that started the route with
// WithCompleter, and runs as the route's body does: on the caller's
// goroutine, through the route's plan and admission gate, so that it never
// runs for a dead owner; a panic kills the consumer.
type Completer func(ctx context.Context, r CompletionRequest) (Completion, error)

// WithCompleter gives a prompt or template route a completer. The route's
// plan guards its completions as it guards its body. A tool or fixed
// resource has nothing to complete: StartTool and StartResource ignore it.
func WithCompleter(f Completer) StartOption {
	return func(s *startConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil completer", ErrInvalidConfig)
		}
		s.completer = f
		return nil
	}
}

// takeCompleter returns the completer among opts, if any, and opts. An
// option's error is left for start to report.
func takeCompleter(opts []StartOption) ([]StartOption, Completer) {
	var sc startConfig
	for _, o := range opts {
		_ = o(&sc)
	}
	return opts, sc.completer
}

// Complete completes r.Argument of the prompt or template r.Name from
// r.Value, presenting r.Credential to the route's plan, and runs the
// route's completer on the calling goroutine. A route without a completer
// answers no values. Errors: ErrNotFound for a prompt, and for a template
// (also for a template listed under other variable names, and for a dead
// owner's route), ErrInvalidArguments for an argument or variable the route
// does not declare, a denial, the errors of admission (ErrRouteGone,
// ErrRoutePanicked, ErrOverloaded), the completer's own;
// ErrInvalidArguments also for another Kind.
//
// It is safe for concurrent use; it costs a lookup, the guard and the
// completer, and for a template a parse of r.Name.
func (c *Catalog) Complete(ctx context.Context, r CompletionRequest) (Completion, error) {
	rq := CompletionRequest{Kind: r.Kind, Name: r.Name, Argument: r.Argument, Value: r.Value, Context: r.Context}
	switch r.Kind {
	case KindPrompt:
		return c.completePrompt(ctx, r.Name, r.Credential, rq)
	case KindTemplate:
		return c.completeTemplate(ctx, r.Name, r.Credential, rq)
	}
	return Completion{}, fmt.Errorf("catalog: complete: %w: %s routes have nothing to complete", ErrInvalidArguments, quote.Name(string(r.Kind)))
}

func (c *Catalog) completePrompt(ctx context.Context, name, credential string, rq CompletionRequest) (Completion, error) {
	arg := rq.Argument
	rt, err := c.resolve(ctx, &c.prompts, name, credential, &rq.Principal)
	if err != nil {
		return Completion{}, c.refused(ctx, err)
	}
	pr := rt.prompt
	declared := false
	for _, a := range pr.prompt.Arguments {
		declared = declared || a.Name == arg
	}
	if !declared {
		return Completion{}, c.refused(ctx, fmt.Errorf("catalog: prompt %s: %w: no argument %s", quote.Name(name), ErrInvalidArguments, quote.Name(arg)))
	}
	return c.runCompleter(ctx, rt, pr.complete, rq)
}

func (c *Catalog) completeTemplate(ctx context.Context, uriTemplate, credential string, rq CompletionRequest) (Completion, error) {
	v := rq.Argument
	if err := c.checkURI(uriTemplate); err != nil {
		return Completion{}, c.refused(ctx, err)
	}
	key, _, err := parseTemplate(uriTemplate)
	if err != nil {
		return Completion{}, c.refused(ctx, &unknownError{"resource", uriTemplate})
	}
	rt, err := c.resolve(ctx, &c.templates, key, credential, &rq.Principal)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			err = &unknownError{"resource", uriTemplate}
		}
		return Completion{}, c.refused(ctx, err)
	}
	tr := rt.template
	if tr.tpl.URITemplate != uriTemplate {
		// The live template has other variable names.
		return Completion{}, c.refused(ctx, &unknownError{"resource", uriTemplate})
	}
	declared := false
	for _, n := range tr.tmpl.Varnames() {
		declared = declared || n == v
	}
	if !declared {
		return Completion{}, c.refused(ctx, fmt.Errorf("catalog: resource template %s: %w: no variable %s", quote.Name(uriTemplate), ErrInvalidArguments, quote.Name(v)))
	}
	return c.runCompleter(ctx, rt, tr.complete, rq)
}

// runCompleter admits a completion through rt's gate and runs f, if any.
func (c *Catalog) runCompleter(ctx context.Context, rt *route, f Completer, rq CompletionRequest) (res Completion, err error) {
	s, err := rt.admit(ctx)
	if err != nil {
		return Completion{}, c.refused(ctx, err)
	}
	returned := f == nil // bodyReturned: see route.finish
	defer rt.finish(ctx, s, &err, &returned)
	if f == nil {
		return Completion{}, nil
	}
	rq.Owner = rt.ref
	res, err = f(ctx, rq)
	returned = true
	if len(res.Values) > maxCompletionValues {
		res.Values, res.HasMore = res.Values[:maxCompletionValues], true
	}
	return res, err
}
