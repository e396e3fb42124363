package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// methodListTemplates is the template listing the middleware answers from
// the catalog; resources/read of a templated URI goes through
// catalog.Catalog.ReadResource with every other read.
const methodListTemplates = "resources/templates/list"

func (s *Server) listResourceTemplates(req *mcp.ListResourceTemplatesRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	ts, next, err := pageOf(s, methodListTemplates, cursor, s.cat.Templates().Page, func(t catalog.ResourceTemplate) *mcp.ResourceTemplate {
		return &mcp.ResourceTemplate{URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType}
	})
	if err != nil {
		return nil, err
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: ts, NextCursor: next, Cacheable: s.listCache}, nil
}
