package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/cmd/livereg-mcp/internal/conformance"
)

var public = bindsec.Plan{Public: true}

// starter starts consumers one after another and remembers them, so that a
// failure part-way stops the ones already started. In a fleet (adopt set),
// a start refused because another replica serves the name is no failure:
// it is left to adopt, which takes the name over when it is free, and
// which starts again a consumer that dies.
type starter struct {
	ctx   context.Context
	cat   *catalog.Catalog
	adopt *adopter
	ks    []*catalog.Consumer
	err   error
}

func (s *starter) tool(t catalog.Tool, p bindsec.Plan, h catalog.ToolHandler) {
	s.start(catalog.KindTool, t.Name, func() (*catalog.Consumer, error) { return s.cat.StartTool(s.ctx, t, p, h) })
}

func (s *starter) resource(r catalog.Resource, p bindsec.Plan, rd catalog.ResourceReader) {
	s.start(catalog.KindResource, r.URI, func() (*catalog.Consumer, error) { return s.cat.StartResource(s.ctx, r, p, rd) })
}

// start runs start unless an earlier one failed; kind and name are the
// route's as a fleet claims it.
func (s *starter) start(kind catalog.Kind, name string, start func() (*catalog.Consumer, error)) {
	if s.err != nil {
		return
	}
	k, err := start()
	if s.adopt != nil {
		p := adoption{kind, name, start}
		switch {
		case err == nil:
			s.adopt.watch(p, k)
		case errors.Is(err, catalog.ErrDuplicate):
			s.adopt.add(p)
			return
		}
	}
	s.keep(k, err)
}

func (s *starter) keep(k *catalog.Consumer, err error) {
	if err != nil {
		s.err = err
		return
	}
	s.ks = append(s.ks, k)
}

func (s *starter) done() ([]*catalog.Consumer, error) {
	if s.err != nil {
		stopAll(s.ks)
		return nil, s.err
	}
	return s.ks, nil
}

// startConformance starts the fixtures of the MCP conformance suite
// (package conformance) as the demo's routes start: in a fleet, one that
// another replica serves is left to adopt.
func startConformance(ctx context.Context, cat *catalog.Catalog, adopt *adopter) ([]*catalog.Consumer, error) {
	routes, err := conformance.Routes()
	if err != nil {
		return nil, err
	}
	s := &starter{ctx: ctx, cat: cat, adopt: adopt}
	for _, r := range routes {
		s.start(r.Kind, r.Name, func() (*catalog.Consumer, error) { return r.Start(ctx, cat) })
	}
	return s.done()
}

// demoRoutes are the consumers run starts: the demo, the conformance
// fixtures if asked for, and, in a fleet, the replica's own tool.
type demoRoutes struct {
	v  *victim
	ks []*catalog.Consumer
}

// start starts them; on error, what started is kept for stop.
func (d *demoRoutes) start(ctx context.Context, cfg config, cat *catalog.Catalog, fl *fleet, adopt *adopter, log *slog.Logger) error {
	ks, err := startDemo(ctx, cat, adopt)
	d.ks = append(d.ks, ks...)
	if err != nil {
		return err
	}
	if d.v, ks, err = startVictimDemo(ctx, cat, log, adopt); err != nil {
		return err
	}
	d.ks = append(d.ks, ks...)
	if cfg.conformance {
		ks, err = startConformance(ctx, cat, adopt)
		d.ks = append(d.ks, ks...)
		if err != nil {
			return err
		}
	}
	if fl != nil {
		start := func() (*catalog.Consumer, error) { return fl.startReplicaTool(ctx, cat) }
		k, err := start()
		if err != nil {
			return err
		}
		d.ks = append(d.ks, k)
		adopt.watch(adoption{catalog.KindTool, replicaToolPrefix + fl.rep.Name(), start}, k)
	}
	return nil
}

// stop stops them, and the consumers an adopter took over.
func (d *demoRoutes) stop(adopted []*catalog.Consumer) {
	if d.v != nil {
		d.v.stop(context.Background())
	}
	stopAll(append(d.ks, adopted...))
}

// startDemo starts the built-in demo consumers: the public tools echo and
// stats, the tool whoami for any authenticated caller, and the public
// resource livereg://about.
func startDemo(ctx context.Context, cat *catalog.Catalog, adopt *adopter) ([]*catalog.Consumer, error) {
	s := &starter{ctx: ctx, cat: cat, adopt: adopt}
	s.tool(catalog.Tool{
		Name: "echo", Title: "Echo",
		Description: "Returns the text it is given.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"what to echo"}},"required":["text"]}`),
	}, public, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		var in struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(orEmptyObject(c.Arguments), &in); err != nil || in.Text == nil {
			return catalog.ErrorResult(`echo needs {"text": "..."}`), nil
		}
		return catalog.TextResult(*in.Text), nil
	})
	s.tool(catalog.Tool{
		Name: "stats", Title: "Catalog statistics",
		Description: "Reports how many tools and resources the catalog serves, the slots they hold and its version.",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"tools":{"type":"integer"},"resources":{"type":"integer"},` +
			`"toolSlots":{"type":"integer"},"resourceSlots":{"type":"integer"},"version":{"type":"integer"}}}`),
	}, public, func(context.Context, catalog.Call) (catalog.Result, error) {
		st := cat.Stats()
		out := map[string]any{
			"tools": st.Tools, "resources": st.Resources,
			"toolSlots": st.ToolSlots, "resourceSlots": st.ResourceSlots, "version": st.Version,
		}
		b, err := json.Marshal(out)
		if err != nil {
			return catalog.Result{}, err
		}
		r := catalog.TextResult(string(b))
		r.StructuredContent = out
		return r, nil
	})
	// The zero plan admits any authenticated principal.
	s.tool(catalog.Tool{
		Name: "whoami", Title: "Who am I",
		Description: "Reports the subject and roles of the bearer token presented; needs a token.",
	}, bindsec.Plan{}, func(_ context.Context, c catalog.Call) (catalog.Result, error) {
		roles := strings.Join(slices.Collect(c.Principal.Roles()), ", ")
		if roles == "" {
			roles = "none"
		}
		return catalog.TextResult(fmt.Sprintf("subject: %s; roles: %s", c.Principal.Subject(), roles)), nil
	})
	s.resource(catalog.Resource{
		URI: "livereg://about", Name: "about", MIMEType: "text/markdown",
		Description: "What this server is and how its routes live.",
	}, public, func(context.Context, catalog.Read) (catalog.Contents, error) {
		return catalog.Contents{Text: about}, nil
	})
	return s.done()
}

const about = `# livereg-mcp

An MCP server whose tools and resources live in a livereg catalog. Every
route belongs to a consumer; when a consumer dies, by stop, cancellation,
panic or being dropped, its routes leave the listings at once, clients are
told (notifications/*/list_changed), and a restart takes the name over.
`

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}

// stopAll stops ks, giving them 5 s together to return.
func stopAll(ks []*catalog.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range ks {
		_ = k.Stop(ctx)
	}
}
