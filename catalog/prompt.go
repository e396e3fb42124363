package catalog

import (
	"context"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// maxPromptNameLen is the longest prompt name StartPrompt accepts, in
// bytes.
const maxPromptNameLen = 256

// Prompt describes a prompt route, as prompts/list advertises it.
type Prompt struct {
	Name        string
	Title       string
	Description string
	// Arguments are the prompt's arguments, in the order listed; their
	// names are unique.
	Arguments []PromptArgument
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string
	Title       string
	Description string
	// Required arguments must be given to GetPrompt, or it fails with
	// ErrInvalidArguments before the handler runs.
	Required bool
}

// PromptGet is one prompts/get as a PromptHandler receives it.
type PromptGet struct {
	Name string
	// Arguments are the arguments the caller gave; the prompt's required
	// ones are all there. Read-only: the map is the caller's.
	Arguments map[string]string
	// Principal and Owner are as in Call.
	Principal bindsec.Principal
	Owner     owner.Ref
}

// PromptMessage is one message of a prompt's result. Role is "user" or
// "assistant"; Content is one item, as in a tool result.
type PromptMessage struct {
	Role    string
	Content Content
}

// PromptResult is what a prompt handler returns.
type PromptResult struct {
	Description string
	Messages    []PromptMessage
}

// PromptHandler is a prompt route's body. It runs as a ToolHandler does: on
// the caller's goroutine, under the route's admission gate, a panic killing
// its consumer.
type PromptHandler func(ctx context.Context, g PromptGet) (PromptResult, error)

// capOrOff is a prompt or template cap: 0 for the default, negative for
// none (a side of one that nothing fills).
func capOrOff(n int) int {
	if n < 0 {
		return 1
	}
	return orDefault(n, defaultCap)
}

// promptName is the prompt side's name rule: at most maxPromptNameLen
// bytes, no spaces or control characters (the registry has refused
// empty names and invalid UTF-8 already).
func promptName(name string) error {
	if len(name) > maxPromptNameLen {
		return fmt.Errorf("prompt names have at most %d bytes, this one has %d", maxPromptNameLen, len(name))
	}
	for i, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("prompt names have no spaces or control characters (byte %d is %q)", i, r)
		}
	}
	return nil
}

// checkArguments is StartPrompt's rule for a prompt's arguments: each
// has a name, and no two the same.
func checkArguments(args []PromptArgument) error {
	seen := make(map[string]bool, len(args))
	for i, a := range args {
		switch {
		case a.Name == "":
			return fmt.Errorf("%w: argument %d has no name", ErrInvalidRoute, i)
		case seen[a.Name]:
			return fmt.Errorf("%w: two arguments named %s", ErrInvalidRoute, quote.Name(a.Name))
		}
		seen[a.Name] = true
	}
	return nil
}

// CheckPrompt reports whether StartPrompt would accept p's name and
// arguments: ErrInvalidName for a name the prompt side refuses (empty,
// over 256 bytes, invalid UTF-8, a space or a control character),
// ErrInvalidRoute for an argument without a name or two of one name. A
// fleet's replicas (package etcdfleet) hold another's prompt records to
// the rule a local start applies. It quotes nothing beyond quote.Name's
// bound.
func CheckPrompt(p Prompt) error {
	if p.Name == "" || len(p.Name) > maxPromptNameLen || !utf8.ValidString(p.Name) {
		return fmt.Errorf("%w: a prompt name of %d bytes, or not UTF-8", ErrInvalidName, len(p.Name))
	}
	if err := promptName(p.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	return checkArguments(p.Arguments)
}

// promptRoute is what a prompt route needs beyond its route entry.
type promptRoute struct {
	prompt   Prompt
	get      PromptHandler
	complete Completer // nil: the prompt offers no completions
}

// StartPrompt starts a consumer serving prompt p with handler h under plan
// p. It behaves as StartTool: the same start order, duplicate guard, cap
// (Config.MaxPrompts), owner-conditional stop and reclaim on death.
// Errors as StartTool's (ErrInvalidName for a name over 256 bytes), and
// ErrInvalidRoute for a nil handler, an argument without a name, or two arguments of the same name; ErrCapReached
// when the catalog holds no prompts. Options: those of StartTool, and
// WithCompleter.
func (c *Catalog) StartPrompt(ctx context.Context, p Prompt, plan bindsec.Plan, h PromptHandler, opts ...StartOption) (*Consumer, error) {
	fail := func(err error) (*Consumer, error) {
		return nil, fmt.Errorf("catalog: start prompt %q: %w", p.Name, err)
	}
	if h == nil {
		return fail(fmt.Errorf("%w: nil handler", ErrInvalidRoute))
	}
	if c.promptView.off {
		return fail(fmt.Errorf("%w: this catalog holds no prompts", ErrCapReached))
	}
	if err := checkArguments(p.Arguments); err != nil {
		return fail(err)
	}
	p.Arguments = append([]PromptArgument(nil), p.Arguments...)
	ext := &promptRoute{prompt: p, get: h}
	opts, ext.complete = takeCompleter(opts)
	rt := &route{tool: Tool{Name: p.Name, Title: p.Title, Description: p.Description}, prompt: ext}
	return c.start(ctx, &c.prompts, p.Name, plan, rt, opts)
}

// GetPrompt gets the prompt name with args, presenting credential to the
// route's plan, and runs its handler on the calling goroutine, as CallTool
// does a tool's body. A required argument missing from args fails with
// ErrInvalidArguments before the handler runs; arguments the prompt does
// not declare are passed on. Errors: ErrNotFound, ErrInvalidArguments,
// ErrRouteGone, ErrRoutePanicked, ErrOverloaded, ErrInvalidResult (a
// message whose role is neither "user" nor "assistant"), a denial (see
// Denied), the context's error, or the handler's own.
//
// It is safe for concurrent use. It costs what CallTool costs.
func (c *Catalog) GetPrompt(ctx context.Context, name string, args map[string]string, credential string, opts ...CallOption) (res PromptResult, err error) {
	g := PromptGet{Name: name, Arguments: args}
	rt, err := c.resolve(ctx, &c.prompts, name, credential, &g.Principal)
	if err != nil {
		if len(opts) != 0 {
			err = c.roundGone(KindPrompt, name, err, opts)
		}
		return PromptResult{}, c.refused(ctx, err)
	}
	pr := rt.prompt
	for _, a := range pr.prompt.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return PromptResult{}, c.refused(ctx, fmt.Errorf("catalog: prompt %s: %w: argument %s is required", quote.Name(name), ErrInvalidArguments, quote.Name(a.Name)))
		}
	}
	var round *Round
	if len(opts) != 0 {
		ctx, round = withOptions(ctx, opts)
		if round != nil {
			if err := rt.checkRound(round); err != nil {
				return PromptResult{}, c.refused(ctx, err)
			}
		}
	}
	s, err := rt.admit(ctx)
	if err != nil {
		return PromptResult{}, c.refused(ctx, err)
	}
	var returned bool // bodyReturned: see route.finish
	defer rt.finish(ctx, s, &err, &returned)
	g.Owner = rt.ref
	res, err = pr.get(ctx, g)
	returned = true
	if err != nil && round != nil {
		return PromptResult{}, rt.endRound(round, err)
	}
	if err == nil {
		for i, m := range res.Messages {
			if m.Role != "user" && m.Role != "assistant" {
				return PromptResult{}, fmt.Errorf("catalog: prompt %s: %w: message %d has role %s", quote.Name(name), ErrInvalidResult, i, quote.Name(m.Role))
			}
		}
	}
	return res, err
}

func promptDesc(rt *route) Prompt { return rt.prompt.prompt }
