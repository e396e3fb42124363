package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/internal/quote"
	"github.com/livereg/livereg/owner"
)

// ErrUnknownPrompt: no live, ready prompt of that name. MCP answers it with
// JSON-RPC error -32602.
var ErrUnknownPrompt = errors.New("catalog: unknown prompt")

// MaxPromptNameLen is the longest prompt name StartPrompt accepts, in
// bytes.
const MaxPromptNameLen = 256

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

// surface holds the routes of an MCP server beyond tools and fixed
// resources: prompts and resource templates, each a side of its own under
// the same owner discipline, and what the catalog keeps beside their
// route entries.
type surface struct {
	prompts, templates       side
	promptsOff, templatesOff bool // Config said the catalog holds none
	promptList               atomic.Pointer[projection[Prompt]]
	templateList             atomic.Pointer[projection[ResourceTemplate]]
	index                    templateIndex
	subs                     updates
	// beforeUnindex, a test hook, runs before a dead owner's template
	// leaves the index; nil outside tests.
	beforeUnindex func()
}

// init makes the sides. A negative cap turns a kind off: its side is made
// with a cap of one that nothing fills, so that every method works on it.
func (s *surface) init(cfg Config) error {
	var err error
	s.promptsOff, s.templatesOff = cfg.MaxPrompts < 0, cfg.MaxTemplates < 0
	s.prompts, err = newSide("prompt", ErrUnknownPrompt, capOrOff(cfg.MaxPrompts), promptName, cfg.MissingPlan)
	if err != nil {
		return err
	}
	s.templates, err = newSide("resource template", ErrUnknownResource, capOrOff(cfg.MaxTemplates), templateKey, cfg.MissingPlan)
	return err
}

func capOrOff(n int) int {
	if n < 0 {
		return 1
	}
	return orDefault(n, DefaultCap)
}

// promptName is the prompt side's name rule: at most MaxPromptNameLen
// bytes, no spaces or control characters (the registry has refused
// empty names and invalid UTF-8 already).
func promptName(name string) error {
	if len(name) > MaxPromptNameLen {
		return fmt.Errorf("prompt names have at most %d bytes, this one has %d", MaxPromptNameLen, len(name))
	}
	for i, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("prompt names have no spaces or control characters (byte %d is %q)", i, r)
		}
	}
	return nil
}

// promptRoute is what a prompt route needs beyond its route entry.
type promptRoute struct {
	prompt   Prompt
	get      PromptHandler
	complete Completer // nil: the prompt offers no completions
}

// HoldsPrompts reports whether the catalog can hold prompts at all
// (Config.MaxPrompts is not negative). A server advertises prompts only
// then.
func (c *Catalog) HoldsPrompts() bool { return !c.surf.promptsOff }

// StartPrompt starts a consumer serving prompt p with handler h under plan
// p. It behaves as StartTool: the same start order, duplicate guard, cap
// (Config.MaxPrompts), owner-conditional stop and reclaim on death.
// Errors as StartTool's, and ErrInvalidRoute for a nil handler, an
// argument without a name, or two arguments of the same name; ErrCapReached
// when the catalog holds no prompts. Options: those of StartTool, and
// WithCompleter.
func (c *Catalog) StartPrompt(ctx context.Context, p Prompt, plan bindsec.Plan, h PromptHandler, opts ...StartOption) (*Consumer, error) {
	fail := func(err error) (*Consumer, error) {
		return nil, fmt.Errorf("catalog: start prompt %q: %w", p.Name, err)
	}
	if h == nil {
		return fail(fmt.Errorf("%w: nil handler", ErrInvalidRoute))
	}
	if c.surf.promptsOff {
		return fail(fmt.Errorf("%w: this catalog holds no prompts", ErrCapReached))
	}
	seen := make(map[string]bool, len(p.Arguments))
	for i, a := range p.Arguments {
		switch {
		case a.Name == "":
			return fail(fmt.Errorf("%w: argument %d has no name", ErrInvalidRoute, i))
		case seen[a.Name]:
			return fail(fmt.Errorf("%w: two arguments named %q", ErrInvalidRoute, a.Name))
		}
		seen[a.Name] = true
	}
	p.Arguments = append([]PromptArgument(nil), p.Arguments...)
	ext := &promptRoute{prompt: p, get: h}
	opts, ext.complete = takeCompleter(opts)
	rt := &route{tool: Tool{Name: p.Name, Title: p.Title, Description: p.Description}, ext: ext}
	return c.start(ctx, &c.surf.prompts, p.Name, plan, rt, opts)
}

func promptOf(rt *route) *promptRoute { return rt.ext.(*promptRoute) }

// GetPrompt gets the prompt name with args, presenting credential to the
// route's plan, and runs its handler on the calling goroutine, as CallTool
// does a tool's body. A required argument missing from args fails with
// ErrInvalidArguments before the handler runs; arguments the prompt does
// not declare are passed on. Errors: ErrUnknownPrompt, ErrInvalidArguments,
// ErrRouteGone, ErrRoutePanicked, ErrOverloaded, ErrInvalidResult (a
// message whose role is neither "user" nor "assistant"), a denial (see
// Denied), the context's error, or the handler's own.
//
// It is safe for concurrent use. It costs what CallTool costs.
func (c *Catalog) GetPrompt(ctx context.Context, name string, args map[string]string, credential string) (res PromptResult, err error) {
	g := PromptGet{Name: name, Arguments: args}
	rt, err := c.resolve(ctx, &c.surf.prompts, name, credential, &g.Principal)
	if err != nil {
		return PromptResult{}, c.refused(ctx, err)
	}
	pr := promptOf(rt)
	for _, a := range pr.prompt.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return PromptResult{}, c.refused(ctx, fmt.Errorf("catalog: prompt %s: %w: argument %s is required", quote.Name(name), ErrInvalidArguments, quote.Name(a.Name)))
		}
	}
	s, err := rt.admit(ctx)
	if err != nil {
		return PromptResult{}, c.refused(ctx, err)
	}
	defer rt.finish(ctx, s, &err)
	g.Owner = rt.ref
	res, err = pr.get(ctx, g)
	if err == nil {
		for i, m := range res.Messages {
			if m.Role != "user" && m.Role != "assistant" {
				return PromptResult{}, fmt.Errorf("catalog: prompt %s: %w: message %d has role %s", quote.Name(name), ErrInvalidResult, i, quote.Name(m.Role))
			}
		}
	}
	return res, err
}

// ListPrompts returns the live, ready prompts sorted by name, under the
// sharing rule of ListTools.
func (c *Catalog) ListPrompts() []Prompt {
	return project(c.surf.prompts.reg.ListReady(), &c.surf.promptList, promptDesc)
}

// PromptsPage is ToolsPage for prompts (prompts/list).
func (c *Catalog) PromptsPage(cursor string, limit int) ([]Prompt, string, error) {
	return page(c.surf.prompts.reg, cursor, limit, promptDesc)
}

func promptDesc(rt *route) Prompt { return promptOf(rt).prompt }

// PromptsVersion is Version for prompts alone.
func (c *Catalog) PromptsVersion() uint64 { return c.surf.prompts.reg.Version() }
