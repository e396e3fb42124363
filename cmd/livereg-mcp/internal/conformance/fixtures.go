// Package conformance holds the fixtures that the official MCP
// conformance suite's server scenarios call: tools, resources, prompts and
// a resource template, whose names, arguments and answers are the
// suite's. They are ordinary public catalog consumers, using only the
// catalog's API; livereg-mcp starts them with -conformance.
//
// Routes describes them without starting them, so that the server starts
// each as it starts its own routes (in a fleet, a name another replica
// holds is left to take over later). Routes is safe for concurrent use;
// each fixture's body is, as a catalog body must be.
package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// Route is one fixture: its kind and name as a fleet claims them (a
// resource's name is its URI, a template's its URI template), and how to
// start its consumer.
type Route struct {
	Kind catalog.Kind
	Name string
	// Start starts the fixture's consumer in cat; its body lives until
	// ctx ends or the consumer stops.
	Start func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error)
}

// Routes returns every fixture, in the order a server starts them. Cost:
// the JSON schemas of two typed tools, inferred once per call.
func Routes() ([]Route, error) {
	var s set
	s.content()
	s.talking()
	s.stateless()
	s.rounds()
	s.tasks()
	s.surface()
	return s.routes, s.err
}

// public is every fixture's plan: the suite calls them without a token.
var public = bindsec.Plan{Public: true}

// set collects routes; err is the first typed tool TypedTool refused.
type set struct {
	routes []Route
	err    error
}

func (s *set) tool(t catalog.Tool, h catalog.ToolHandler) {
	s.routes = append(s.routes, Route{catalog.KindTool, t.Name, func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartTool(ctx, t, public, h)
	}})
}

// typed adds a typed tool, or records why TypedTool refused it.
func (s *set) typed(t catalog.Tool, h catalog.ToolHandler, err error) {
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.tool(t, h)
}

func (s *set) resource(r catalog.Resource, rd catalog.ResourceReader) {
	s.routes = append(s.routes, Route{catalog.KindResource, r.URI, func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartResource(ctx, r, public, rd)
	}})
}

func (s *set) prompt(p catalog.Prompt, h catalog.PromptHandler, opts ...catalog.StartOption) {
	s.routes = append(s.routes, Route{catalog.KindPrompt, p.Name, func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartPrompt(ctx, p, public, h, opts...)
	}})
}

func (s *set) template(t catalog.ResourceTemplate, rd catalog.ResourceReader) {
	s.routes = append(s.routes, Route{catalog.KindTemplate, t.URITemplate, func(ctx context.Context, cat *catalog.Catalog) (*catalog.Consumer, error) {
		return cat.StartResourceTemplate(ctx, t, public, rd)
	}})
}

// Fixture data of the conformance suite: a 1x1 red PNG and a short silent
// WAV (8 kHz, 8-bit mono, 8 samples).
var (
	redPixelPNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	silentWAV   = mustBase64("UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==")
)

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// content adds the tools that return each kind of content, the one that
// fails, and the static resources.
func (s *set) content() {
	fixed := func(name, desc string, r catalog.Result) {
		s.tool(catalog.Tool{Name: name, Description: desc},
			func(context.Context, catalog.Call) (catalog.Result, error) { return r, nil })
	}
	fixed("test_simple_text", "Returns a simple text response.",
		catalog.TextResult("This is a simple text response for testing."))
	fixed("test_image_content", "Returns a 1x1 red PNG image.", catalog.Result{Content: []catalog.Content{
		{Type: "image", Data: redPixelPNG, MIMEType: "image/png"},
	}})
	fixed("test_audio_content", "Returns a short silent WAV clip.", catalog.Result{Content: []catalog.Content{
		{Type: "audio", Data: silentWAV, MIMEType: "audio/wav"},
	}})
	fixed("test_embedded_resource", "Returns an embedded text resource.", catalog.Result{Content: []catalog.Content{
		{Type: "resource", Resource: &catalog.Contents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
		}},
	}})
	fixed("test_multiple_content_types", "Returns text, an image and an embedded resource.", catalog.Result{Content: []catalog.Content{
		{Type: "text", Text: "Multiple content types test:"},
		{Type: "image", Data: redPixelPNG, MIMEType: "image/png"},
		{Type: "resource", Resource: &catalog.Contents{
			URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
		}},
	}})
	// An argument that also travels in a header (SEP-2243): mcpserve
	// refuses a call whose Mcp-Param-Region header disagrees with it.
	s.tool(catalog.Tool{Name: "test_custom_headers", Description: "Echoes its region, which the client also sends in the Mcp-Param-Region header.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(_ context.Context, c catalog.Call) (catalog.Result, error) {
			var in struct {
				Region string `json:"region"`
			}
			if err := json.Unmarshal(c.Arguments, &in); err != nil {
				return catalog.Result{}, err
			}
			return catalog.TextResult("region: " + in.Region), nil
		})
	// A handler error: mcpserve reports it as a tool result with isError.
	s.tool(catalog.Tool{Name: "test_error_handling", Description: "Always fails, to test error reporting."},
		func(context.Context, catalog.Call) (catalog.Result, error) {
			//lint:ignore ST1005 the text the conformance suite documents
			return catalog.Result{}, errors.New("This tool intentionally returns an error for testing")
		})
	s.resource(catalog.Resource{
		URI: "test://static-text", Name: "static-text", MIMEType: "text/plain",
		Description: "A static text resource.",
	}, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{MIMEType: "text/plain", Text: "This is the content of the static text resource."}, nil
	})
	s.resource(catalog.Resource{
		URI: "test://static-binary", Name: "static-binary", MIMEType: "image/png",
		Description: "A static binary resource (a 1x1 PNG).",
	}, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{MIMEType: "image/png", Blob: redPixelPNG}, nil
	})
}
