package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// run serves until ctx ends. ready, if set, is called with the endpoint URL
// once the HTTP listener is open.
//
// Its phases, in order: the clients' authenticator; the listener; the
// fleet (a replica listens before it joins, since it advertises where it
// listens, and joins before its catalog exists, since the catalog claims
// its names through the replica); the catalog and its routes; the MCP
// server; serving. It shuts down in the reverse order (parts.shutdown):
// the server, then the replica (which frees all its names in one
// revision), then its consumers, then the embedded etcd.
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(url string)) error {
	auth, err := authenticator(cfg.tokenConfig, log)
	if err != nil {
		return err
	}
	defer cfg.tlsSettings.watch(log)()
	var ln net.Listener
	if !cfg.stdio {
		if ln, err = listen(ctx, cfg.addr, auth); err != nil {
			return err
		}
		ln = cfg.tlsSettings.listener(ln)
		defer ln.Close() // Serve closes it; this covers an early return
	}
	// The consumers live until run returns: their context is run's.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &parts{cancel: cancel}
	defer p.shutdown()
	if err := p.join(ctx, cfg, ln, log); err != nil {
		return err
	}
	cat, err := p.buildCatalog(cctx, cfg, auth, log)
	if err != nil {
		return err
	}
	opts := serverOptions(cfg, log, p.fl)
	if opts.Fleet != nil {
		opts.Fleet.HTTPClient = cfg.tlsSettings.hopClient()
	}
	srv, err := mcpserve.New(cat, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	p.adopt.run()
	if cfg.stdio {
		stats := cat.Stats()
		log.Info("serving stdio", "tools", stats.Tools, "resources", stats.Resources)
		return srv.ServeStdio(ctx)
	}
	return serveHTTP(ctx, cfg, ln, srv, cat, p.fl, log, ready)
}

// authenticator is the clients' authenticator: nil without tokens, in
// which case only public routes answer.
func authenticator(cfg tokenConfig, log *slog.Logger) (bindsec.Authenticator, error) {
	tokens, err := parseTokens(cfg.tokens)
	if err != nil || tokens == nil {
		// Not tokens itself when nil: a nil *StaticTokens in the
		// interface is a non-nil Authenticator.
		return nil, err
	}
	log.Info("bearer tokens configured", "count", tokens.Len())
	if cfg.tokensOnCmdline {
		log.Warn("bearer tokens were given with -tokens: every user of this machine can read them in ps; use -tokens-file or $" + tokensEnv)
	}
	return tokens, nil
}

// parts are what run starts besides the listener and the server, for
// shutdown to stop in the reverse order. Each may be nil or zero: what an
// early return left unstarted.
type parts struct {
	fl     *fleet
	adopt  *adopter
	demo   demoRoutes
	cancel context.CancelFunc // ends the consumers' context
}

// join joins the fleet if cfg asks for it, advertising ln's address
// unless -advertise says otherwise.
func (p *parts) join(ctx context.Context, cfg config, ln net.Listener, log *slog.Logger) error {
	if !cfg.joins() {
		return nil
	}
	if cfg.fleetTokenOnCmdline {
		log.Warn("the fleet token was given with -fleet-token: every user of this machine can read it in ps; use $" + fleetTokenEnv)
	}
	fl, err := joinFleet(ctx, cfg, ln.Addr(), log)
	if err != nil {
		return err
	}
	p.fl, p.adopt = fl, newAdopter(fl.rep, log)
	return nil
}

// buildCatalog makes the catalog, whose names a replica claims through
// the fleet, and starts its routes on ctx: the demo, the conformance
// fixtures if asked for, and a replica's own tool.
func (p *parts) buildCatalog(ctx context.Context, cfg config, auth bindsec.Authenticator, log *slog.Logger) (*catalog.Catalog, error) {
	catCfg := catalog.Config{Authenticator: auth, Logger: log}
	if p.fl != nil {
		catCfg.Claimer, catCfg.Remote = p.fl.rep, p.fl.rep.Remote()
	}
	cat, err := catalog.New(catCfg)
	if err != nil {
		return nil, err
	}
	if err := p.demo.start(ctx, cfg, cat, p.fl, p.adopt, log); err != nil {
		return nil, err
	}
	return cat, nil
}

// shutdown stops what run started, once the server has closed.
func (p *parts) shutdown() {
	// The replica first: its Close kills the consumers that hold its
	// names and frees them in one revision, and ends a takeover that
	// waits for a session of an etcd that is gone. The adopter stops
	// before, so as not to start them again.
	p.adopt.stop()
	p.fl.leave()
	adopted := p.adopt.close()
	p.demo.stop(adopted)
	p.fl.stopEtcd()
	p.cancel()
}

// serverOptions are the MCP server's options for cfg; fl is nil outside a
// fleet.
func serverOptions(cfg config, log *slog.Logger, fl *fleet) mcpserve.Options {
	opts := mcpserve.Options{
		Name: "livereg-mcp", Version: version,
		Instructions:     "Tools and resources served from a livereg catalog.",
		Logger:           log,
		Path:             cfg.path,
		ShutdownTimeout:  cfg.shutdownTimeout,
		ListTTL:          cfg.listTTL,
		Stateless:        cfg.stateless,
		MaxListenStreams: cfg.maxListens,
	}
	if fl != nil {
		opts.Fleet = &mcpserve.Fleet{Peers: fl.rep, Token: cfg.fleetToken, PreviousTokens: cfg.fleetPrevious, Advertise: fl.advertise}
	}
	return opts
}
