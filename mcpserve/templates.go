package mcpserve

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodListTemplates is the template listing the middleware answers from
// the catalog; resources/read of a templated URI goes through
// catalog.Catalog.ReadURI with every other read.
const methodListTemplates = "resources/templates/list"

func (s *Server) listResourceTemplates(req *mcp.ListResourceTemplatesRequest) (mcp.Result, error) {
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
	}
	ts, next, err := s.cat.ResourceTemplatesPage(cursor, s.page)
	if err != nil {
		return nil, invalidParams("resources/templates/list: invalid cursor", nil)
	}
	out := &mcp.ListResourceTemplatesResult{ResourceTemplates: make([]*mcp.ResourceTemplate, len(ts)), NextCursor: next, Cacheable: uncached()}
	for i, t := range ts {
		out.ResourceTemplates[i] = &mcp.ResourceTemplate{
			URITemplate: t.URITemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MIMEType,
		}
	}
	return out, nil
}
