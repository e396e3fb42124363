package main

import (
	"context"
	"encoding/base64"
	"errors"

	"github.com/livereg/livereg/catalog"
)

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

// startConformance starts, as ordinary public consumers, the tools and
// resources that the MCP conformance suite's server scenarios call.
func startConformance(ctx context.Context, cat *catalog.Catalog, adopt *adopter) ([]*catalog.Consumer, error) {
	s := &starter{ctx: ctx, cat: cat, adopt: adopt}
	fixed := func(name, desc string, r catalog.Result) {
		s.tool(catalog.Tool{Name: name, Description: desc}, public,
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
	// A handler error: mcpserve reports it as a tool result with isError.
	s.tool(catalog.Tool{Name: "test_error_handling", Description: "Always fails, to test error reporting."}, public,
		func(context.Context, catalog.Call) (catalog.Result, error) {
			//lint:ignore ST1005 the text the conformance suite documents
			return catalog.Result{}, errors.New("This tool intentionally returns an error for testing")
		})
	s.resource(catalog.Resource{
		URI: "test://static-text", Name: "static-text", MIMEType: "text/plain",
		Description: "A static text resource.",
	}, public, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{MIMEType: "text/plain", Text: "This is the content of the static text resource."}, nil
	})
	s.resource(catalog.Resource{
		URI: "test://static-binary", Name: "static-binary", MIMEType: "image/png",
		Description: "A static binary resource (a 1x1 PNG).",
	}, public, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{MIMEType: "image/png", Blob: redPixelPNG}, nil
	})
	startTalkingTools(s)
	startSurfaceConformance(s)
	return s.done()
}
