package etcdfleet

import (
	"encoding/json"
	"sync/atomic"

	"github.com/livereg/livereg/catalog"
)

// Remote returns the replica's View as a [catalog.Remote], and a
// [catalog.RemoteSurface] (prompts and resource templates too): set it as
// the catalog's Config.Remote, beside the Replica as its Claimer, and the
// catalog lists the fleet's routes of every kind, its Version and Changes move when a
// consumer on another replica starts, stops or dies, and a server built on
// it (package mcpserve) sends list_changed. Every call returns the same
// value, which converts each listing once per version.
func (r *Replica) Remote() catalog.Remote { return r.remote }

// objectOnlySchema is the input schema of a record that carries none.
var objectOnlySchema = json.RawMessage(`{"type":"object"}`)

// remote adapts a View to catalog.Remote, caching the listings it converts.
type remote struct {
	v         *View
	tools     atomic.Pointer[converted[catalog.Tool]]
	resources atomic.Pointer[converted[catalog.Resource]]
	prompts   atomic.Pointer[converted[catalog.Prompt]]
	templates atomic.Pointer[converted[catalog.ResourceTemplate]]
}

// The catalog lists the fleet's prompts and templates too.
var _ catalog.RemoteSurface = (*remote)(nil)

// converted is a listing converted for the catalog at one view version.
type converted[T any] struct {
	version uint64
	out     []T
}

func (m *remote) ToolsVersion() uint64     { return m.v.toolsVersion.Load() }
func (m *remote) ResourcesVersion() uint64 { return m.v.resourcesVersion.Load() }
func (m *remote) PromptsVersion() uint64   { return m.v.promptsVersion.Load() }
func (m *remote) TemplatesVersion() uint64 { return m.v.templatesVersion.Load() }
func (m *remote) Watch(f func())           { m.v.Watch(f) }

func (m *remote) Tools() []catalog.Tool {
	return convert(m.v.toolsVersion.Load(), &m.tools, m.v.Tools, func(d ToolDesc) catalog.Tool {
		in := d.InputSchema
		if len(in) == 0 {
			// As a local start defaults it: MCP requires one.
			in = objectOnlySchema
		}
		return catalog.Tool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: in, OutputSchema: d.OutputSchema}
	})
}

func (m *remote) Resources() []catalog.Resource {
	return convert(m.v.resourcesVersion.Load(), &m.resources, m.v.Resources, func(d ResourceDesc) catalog.Resource {
		return catalog.Resource{URI: d.URI, Name: d.Name, Description: d.Description, MIMEType: d.MIMEType}
	})
}

func (m *remote) Prompts() []catalog.Prompt {
	return convert(m.v.promptsVersion.Load(), &m.prompts, m.v.Prompts, func(d PromptDesc) catalog.Prompt {
		p := catalog.Prompt{Name: d.Name, Title: d.Title, Description: d.Description}
		for _, a := range d.Arguments {
			p.Arguments = append(p.Arguments, catalog.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		return p
	})
}

func (m *remote) Templates() []catalog.ResourceTemplate {
	return convert(m.v.templatesVersion.Load(), &m.templates, m.v.Templates, func(d TemplateDesc) catalog.ResourceTemplate {
		return catalog.ResourceTemplate{URITemplate: d.URITemplate, Name: d.Name, Title: d.Title, Description: d.Description, MIMEType: d.MIMEType}
	})
}

// convert returns the listing converted at version, converting it anew
// when the cache holds another version's. The version is read before the
// listing, so a cached listing is never older than its version says.
func convert[D, T any](version uint64, cache *atomic.Pointer[converted[T]], list func() []D, f func(D) T) []T {
	if c := cache.Load(); c != nil && c.version == version {
		return c.out
	}
	descs := list()
	out := make([]T, len(descs))
	for i, d := range descs {
		out[i] = f(d)
	}
	cache.Store(&converted[T]{version: version, out: out})
	return out
}
