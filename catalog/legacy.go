package catalog

import "context"

// The forwards below keep the catalog's former API for the callers outside
// the package that still use it; each names its replacement.

// TypedTool returns the Tool and handler StartTypedTool starts.
//
// Deprecated: use StartTypedTool.
func TypedTool[In, Out any](t Tool, h TypedHandler[In, Out]) (Tool, ToolHandler, error) {
	return typedTool(t, h)
}

// CompletePrompt completes a prompt's argument.
//
// Deprecated: use Complete with KindPrompt.
func (c *Catalog) CompletePrompt(ctx context.Context, name, arg, value string, given map[string]string, credential string) (Completion, error) {
	return c.Complete(ctx, CompleteRequest{Kind: KindPrompt, Name: name, Argument: arg, Value: value, Context: given, Credential: credential})
}

// CompleteTemplate completes a resource template's variable.
//
// Deprecated: use Complete with KindTemplate.
func (c *Catalog) CompleteTemplate(ctx context.Context, uriTemplate, v, value string, given map[string]string, credential string) (Completion, error) {
	return c.Complete(ctx, CompleteRequest{Kind: KindTemplate, Name: uriTemplate, Argument: v, Value: value, Context: given, Credential: credential})
}

// ListTools lists the tools.
//
// Deprecated: use Tools().List.
func (c *Catalog) ListTools() []Tool { return c.Tools().List() }

// ListResources lists the resources.
//
// Deprecated: use Resources().List.
func (c *Catalog) ListResources() []Resource { return c.Resources().List() }

// ListPrompts lists the prompts.
//
// Deprecated: use Prompts().List.
func (c *Catalog) ListPrompts() []Prompt { return c.Prompts().List() }

// ListResourceTemplates lists the resource templates.
//
// Deprecated: use Templates().List.
func (c *Catalog) ListResourceTemplates() []ResourceTemplate { return c.Templates().List() }

// ToolsPage pages the tools.
//
// Deprecated: use Tools().Page.
func (c *Catalog) ToolsPage(cursor string, limit int) ([]Tool, string, error) {
	return c.Tools().Page(cursor, limit)
}

// ResourcesPage pages the resources.
//
// Deprecated: use Resources().Page.
func (c *Catalog) ResourcesPage(cursor string, limit int) ([]Resource, string, error) {
	return c.Resources().Page(cursor, limit)
}

// PromptsPage pages the prompts.
//
// Deprecated: use Prompts().Page.
func (c *Catalog) PromptsPage(cursor string, limit int) ([]Prompt, string, error) {
	return c.Prompts().Page(cursor, limit)
}

// ResourceTemplatesPage pages the resource templates.
//
// Deprecated: use Templates().Page.
func (c *Catalog) ResourceTemplatesPage(cursor string, limit int) ([]ResourceTemplate, string, error) {
	return c.Templates().Page(cursor, limit)
}

// ToolsVersion is the tools' version.
//
// Deprecated: use Tools().Version.
func (c *Catalog) ToolsVersion() uint64 { return c.Tools().Version() }

// ResourcesVersion is the resources' version.
//
// Deprecated: use Resources().Version.
func (c *Catalog) ResourcesVersion() uint64 { return c.Resources().Version() }

// PromptsVersion is the prompts' version.
//
// Deprecated: use Prompts().Version.
func (c *Catalog) PromptsVersion() uint64 { return c.Prompts().Version() }

// TemplatesVersion is the resource templates' version.
//
// Deprecated: use Templates().Version.
func (c *Catalog) TemplatesVersion() uint64 { return c.Templates().Version() }

// HoldsPrompts reports whether the catalog can hold prompts.
//
// Deprecated: use Prompts().Enabled.
func (c *Catalog) HoldsPrompts() bool { return c.Prompts().Enabled() }

// HoldsResourceTemplates reports whether the catalog can hold templates.
//
// Deprecated: use Templates().Enabled.
func (c *Catalog) HoldsResourceTemplates() bool { return c.Templates().Enabled() }
