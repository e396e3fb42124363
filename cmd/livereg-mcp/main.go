// Command livereg-mcp is an MCP server whose tools and resources live in a
// livereg catalog: streamable HTTP at /mcp (default 127.0.0.1:8931) or stdio.
//
// It starts a few demo consumers (the tools echo, stats and whoami, and the
// resource livereg://about); with -conformance it also starts the fixture
// tools and resources that the official MCP conformance suite calls.
//
// Usage:
//
//	livereg-mcp [-addr host:port] [-path /mcp] [-stdio] [-conformance]
//	            [-tokens spec] [-url-file file] [-log-level level] [-log-json]
//
// Bearer tokens come from -tokens or, when it is empty, from the
// LIVEREG_MCP_TOKENS environment variable (preferred: a command line is
// visible to every user of the machine). The spec is a comma-separated list
// of TOKEN=SUBJECT[:ROLE[+ROLE...]] entries, for example
//
//	LIVEREG_MCP_TOKENS='s3cret=alice:admin+ops,other=bob' livereg-mcp
//
// Without tokens only public routes answer and the server refuses to listen
// on a non-loopback address. SIGINT or SIGTERM shuts it down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// version is reported to clients as serverInfo.version.
const version = "0.1.0"

// tokensEnv is the environment variable read when -tokens is empty.
const tokensEnv = "LIVEREG_MCP_TOKENS"

type config struct {
	addr, path      string
	stdio           bool
	conformance     bool
	tokens          string
	urlFile         string
	logLevel        slog.Level
	logJSON         bool
	shutdownTimeout time.Duration
}

func parseArgs(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("livereg-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8931", "TCP address to serve streamable HTTP on")
	fs.StringVar(&cfg.path, "path", "/mcp", "URL path of the MCP endpoint")
	fs.BoolVar(&cfg.stdio, "stdio", false, "serve one session over stdin/stdout instead of HTTP")
	fs.BoolVar(&cfg.conformance, "conformance", false, "also start the fixtures of the MCP conformance suite")
	fs.StringVar(&cfg.tokens, "tokens", "", "bearer tokens, TOKEN=SUBJECT[:ROLE[+ROLE...]],... (default $"+tokensEnv+")")
	fs.StringVar(&cfg.urlFile, "url-file", "", "write the endpoint URL to this file once listening")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	fs.BoolVar(&cfg.logJSON, "log-json", false, "log JSON lines instead of text")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", mcpserve.DefaultShutdownTimeout, "bound on the graceful shutdown")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if cfg.tokens == "" {
		cfg.tokens = getenv(tokensEnv)
	}
	return cfg, nil
}

// parseTokens reads a token spec; nil means no tokens. Errors never quote
// a token.
func parseTokens(spec string) (*bindsec.StaticTokens, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	table := map[string]bindsec.Principal{}
	for i, entry := range strings.Split(spec, ",") {
		token, who, ok := strings.Cut(strings.TrimSpace(entry), "=")
		token = strings.TrimSpace(token)
		if !ok || token == "" || strings.ContainsAny(token, " \t") {
			return nil, fmt.Errorf("tokens: entry %d is not TOKEN=SUBJECT[:ROLE[+ROLE...]]", i+1)
		}
		subject, roles, _ := strings.Cut(who, ":")
		pr := bindsec.Principal{Subject: strings.TrimSpace(subject)}
		if pr.Subject == "" {
			return nil, fmt.Errorf("tokens: entry %d has no subject", i+1)
		}
		for r := range strings.SplitSeq(roles, "+") {
			if r = strings.TrimSpace(r); r != "" {
				pr.Roles = append(pr.Roles, r)
			}
		}
		if _, dup := table[token]; dup {
			return nil, fmt.Errorf("tokens: entry %d repeats a token", i+1)
		}
		table[token] = pr
	}
	return bindsec.NewStaticTokens(table), nil
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: cfg.logLevel}
	if cfg.logJSON {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// run serves until ctx ends. ready, if set, is called with the endpoint URL
// once the HTTP listener is open.
func run(ctx context.Context, cfg config, log *slog.Logger, ready func(url string)) error {
	tokens, err := parseTokens(cfg.tokens)
	if err != nil {
		return err
	}
	var auth bindsec.Authenticator
	if tokens != nil {
		auth = tokens
		log.Info("bearer tokens configured", "count", tokens.Len())
	}
	cat, err := catalog.New(catalog.Config{Authenticator: auth})
	if err != nil {
		return err
	}
	// The consumers live until run returns: their context is run's.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	consumers, err := startDemo(cctx, cat)
	if err == nil && cfg.conformance {
		var more []*catalog.Consumer
		more, err = startConformance(cctx, cat)
		consumers = append(consumers, more...)
	}
	defer stopAll(consumers)
	if err != nil {
		return err
	}
	srv, err := mcpserve.New(cat, mcpserve.Options{
		Name: "livereg-mcp", Version: version,
		Instructions:    "Tools and resources served from a livereg catalog.",
		Logger:          log,
		Path:            cfg.path,
		ShutdownTimeout: cfg.shutdownTimeout,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	stats := cat.Stats()
	if cfg.stdio {
		log.Info("serving stdio", "tools", stats.Tools, "resources", stats.Resources)
		return srv.ServeStdio(ctx)
	}
	if err := srv.CheckListenAddress(ctx, cfg.addr); err != nil {
		return fmt.Errorf("%w (set -tokens or $%s, or listen on 127.0.0.1)", err, tokensEnv)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	// Checked again on what was bound: a name may resolve differently now.
	if err := srv.CheckExposure(ln.Addr()); err != nil {
		_ = ln.Close()
		return fmt.Errorf("%w (set -tokens or $%s, or listen on 127.0.0.1)", err, tokensEnv)
	}
	url := "http://" + ln.Addr().String() + cfg.path
	log.Info("serving streamable HTTP", "addr", ln.Addr().String(), "url", url,
		"tools", stats.Tools, "resources", stats.Resources, "conformance", cfg.conformance)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()
	if cfg.urlFile != "" {
		if err := writeFileAtomic(cfg.urlFile, url+"\n"); err != nil {
			log.Error("cannot write the URL file", "file", cfg.urlFile, "err", err)
		}
	}
	if ready != nil {
		ready(url)
	}
	err = <-errc
	if err == nil {
		log.Info("stopped")
	}
	return err
}

func stopAll(ks []*catalog.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, k := range ks {
		_ = k.Stop(ctx)
	}
}

// writeFileAtomic writes data so that a reader sees the whole file or none.
func writeFileAtomic(name, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".url-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(data); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), name)
}

func main() {
	cfg, err := parseArgs(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "livereg-mcp:", err)
		os.Exit(2)
	}
	// Logs go to stderr: with -stdio, stdout carries the protocol.
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log, nil); err != nil {
		log.Error("livereg-mcp failed", "err", err)
		stop()
		os.Exit(1)
	}
}
