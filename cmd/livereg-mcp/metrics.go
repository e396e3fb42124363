package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// metrics is a Prometheus collector that reads the catalog's and the
// server's counters when scraped, so that serving calls costs nothing
// extra: Catalog.Stats and Server.Stats are snapshots taken on
// demand. The core packages do not import client_golang; only this
// command does.
type metrics struct {
	cat *catalog.Catalog
	srv *mcpserve.Server

	routes, slots, version               *prometheus.Desc
	calls, deaths, refusals              *prometheus.Desc
	sessionsOpen, sessionsMax            *prometheus.Desc
	sessionsOpened, sessionsRefusedTotal *prometheus.Desc
	listensOpen, listensMax              *prometheus.Desc
	listensOpened, listensRefusedTotal   *prometheus.Desc
	mcpRefusals, subscriptionsHeld       *prometheus.Desc
}

func newMetrics(cat *catalog.Catalog, srv *mcpserve.Server) *metrics {
	kind := []string{"kind"}
	return &metrics{
		cat: cat, srv: srv,
		routes:               prometheus.NewDesc("livereg_routes_live", "Ready routes of live consumers, per kind.", kind, nil),
		slots:                prometheus.NewDesc("livereg_route_slots", "Catalog entries held against the caps, dead ones not yet reclaimed included, per kind.", kind, nil),
		version:              prometheus.NewDesc("livereg_catalog_version", "The catalog's version; it moves on every change.", nil, nil),
		calls:                prometheus.NewDesc("livereg_calls_total", "Calls (tools/call and resources/read) by outcome.", []string{"outcome"}, nil),
		deaths:               prometheus.NewDesc("livereg_consumer_deaths_total", "Deaths of started consumers by path; every death but a stop reclaimed a dead entry.", []string{"path"}, nil),
		refusals:             prometheus.NewDesc("livereg_start_refusals_total", "Starts refused, by reason.", []string{"reason"}, nil),
		sessionsOpen:         prometheus.NewDesc("livereg_mcp_sessions_open", "HTTP sessions held now.", nil, nil),
		sessionsMax:          prometheus.NewDesc("livereg_mcp_sessions_max", "The cap on HTTP sessions; 0: none.", nil, nil),
		sessionsOpened:       prometheus.NewDesc("livereg_mcp_sessions_opened_total", "HTTP sessions created.", nil, nil),
		sessionsRefusedTotal: prometheus.NewDesc("livereg_mcp_sessions_refused_total", "Initializes refused, at the session cap or over a client's share of it.", nil, nil),
		listensOpen:          prometheus.NewDesc("livereg_mcp_listen_streams_open", "subscriptions/listen streams open now.", nil, nil),
		listensMax:           prometheus.NewDesc("livereg_mcp_listen_streams_max", "The cap on open listen streams; 0: none.", nil, nil),
		listensOpened:        prometheus.NewDesc("livereg_mcp_listen_streams_opened_total", "Listen streams admitted.", nil, nil),
		listensRefusedTotal:  prometheus.NewDesc("livereg_mcp_listen_streams_refused_total", "Listen streams refused, at the cap or over a client's share of it.", nil, nil),
		mcpRefusals: prometheus.NewDesc("livereg_mcp_refusals_total",
			"Sessions, listen streams and subscriptions refused, by cap and reason: cap (the cap was reached), share (the client, or the anonymous clients together, held their share of it), session (the session's own subscription cap).",
			[]string{"cap", "reason"}, nil),
		subscriptionsHeld: prometheus.NewDesc("livereg_mcp_subscriptions_held", "Resource subscriptions held now, one per session and URI.", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.routes, m.slots, m.version, m.calls, m.deaths, m.refusals, m.sessionsOpen, m.sessionsMax, m.sessionsOpened, m.sessionsRefusedTotal,
		m.listensOpen, m.listensMax, m.listensOpened, m.listensRefusedTotal, m.mcpRefusals, m.subscriptionsHeld} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.cat.Stats()
	ch <- prometheus.MustNewConstMetric(m.routes, prometheus.GaugeValue, float64(st.Tools), "tool")
	ch <- prometheus.MustNewConstMetric(m.routes, prometheus.GaugeValue, float64(st.Resources), "resource")
	ch <- prometheus.MustNewConstMetric(m.routes, prometheus.GaugeValue, float64(st.Prompts), "prompt")
	ch <- prometheus.MustNewConstMetric(m.routes, prometheus.GaugeValue, float64(st.Templates), "resource_template")
	ch <- prometheus.MustNewConstMetric(m.slots, prometheus.GaugeValue, float64(st.ToolSlots), "tool")
	ch <- prometheus.MustNewConstMetric(m.slots, prometheus.GaugeValue, float64(st.ResourceSlots), "resource")
	ch <- prometheus.MustNewConstMetric(m.slots, prometheus.GaugeValue, float64(st.PromptSlots), "prompt")
	ch <- prometheus.MustNewConstMetric(m.slots, prometheus.GaugeValue, float64(st.TemplateSlots), "resource_template")
	ch <- prometheus.MustNewConstMetric(m.version, prometheus.GaugeValue, float64(st.Version))
	for _, c := range []struct {
		outcome string
		n       uint64
	}{
		{"ok", st.Calls.OK}, {"handler_error", st.Calls.HandlerError}, {"panicked", st.Calls.Panicked},
		{"denied", st.Calls.Denied}, {"gone", st.Calls.Gone}, {"overloaded", st.Calls.Overloaded},
		{"unknown", st.Calls.Unknown}, {"invalid", st.Calls.Invalid}, {"canceled", st.Calls.Canceled},
	} {
		ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(c.n), c.outcome)
	}
	for path, n := range map[string]uint64{"stop": st.Deaths.Stop, "cancel": st.Deaths.Cancel, "panic": st.Deaths.Panic, "drop": st.Deaths.Drop} {
		ch <- prometheus.MustNewConstMetric(m.deaths, prometheus.CounterValue, float64(n), path)
	}
	ch <- prometheus.MustNewConstMetric(m.refusals, prometheus.CounterValue, float64(st.Duplicates), "duplicate")
	ch <- prometheus.MustNewConstMetric(m.refusals, prometheus.CounterValue, float64(st.CapRefusals), "cap")
	ms := m.srv.Stats()
	ch <- prometheus.MustNewConstMetric(m.sessionsOpen, prometheus.GaugeValue, float64(ms.Sessions.Held))
	ch <- prometheus.MustNewConstMetric(m.sessionsMax, prometheus.GaugeValue, float64(ms.Sessions.Max))
	ch <- prometheus.MustNewConstMetric(m.sessionsOpened, prometheus.CounterValue, float64(ms.Sessions.Opened))
	ch <- prometheus.MustNewConstMetric(m.sessionsRefusedTotal, prometheus.CounterValue, float64(ms.Sessions.RefusedAtCap+ms.Sessions.RefusedOverShare))
	ch <- prometheus.MustNewConstMetric(m.listensOpen, prometheus.GaugeValue, float64(ms.ListenStreams.Held))
	ch <- prometheus.MustNewConstMetric(m.listensMax, prometheus.GaugeValue, float64(ms.ListenStreams.Max))
	ch <- prometheus.MustNewConstMetric(m.listensOpened, prometheus.CounterValue, float64(ms.ListenStreams.Opened))
	ch <- prometheus.MustNewConstMetric(m.listensRefusedTotal, prometheus.CounterValue, float64(ms.ListenStreams.RefusedAtCap+ms.ListenStreams.RefusedOverShare))
	for _, c := range []struct {
		name string
		st   mcpserve.CapStats
	}{{"sessions", ms.Sessions}, {"listen_streams", ms.ListenStreams}, {"subscriptions", ms.Subscriptions}} {
		ch <- prometheus.MustNewConstMetric(m.mcpRefusals, prometheus.CounterValue, float64(c.st.RefusedAtCap), c.name, "cap")
		ch <- prometheus.MustNewConstMetric(m.mcpRefusals, prometheus.CounterValue, float64(c.st.RefusedOverShare), c.name, "share")
		if c.name == "subscriptions" {
			ch <- prometheus.MustNewConstMetric(m.mcpRefusals, prometheus.CounterValue, float64(c.st.RefusedPerSession), c.name, "session")
		}
	}
	ch <- prometheus.MustNewConstMetric(m.subscriptionsHeld, prometheus.GaugeValue, float64(ms.Subscriptions.Held))
}

// serveMetrics serves /metrics on ln in the Prometheus text format until
// ctx ends. A registry of its own (not the global one) holds the livereg
// collector and Go's runtime and process collectors.
func serveMetrics(ctx context.Context, ln net.Listener, cat *catalog.Catalog, srv *mcpserve.Server, log *slog.Logger, extra ...prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(extra...)
	reg.MustRegister(newMetrics(cat, srv), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	// The bounds of the MCP endpoint's defaults (mcpserve.Limits): a
	// scraper is as untrusted as any client.
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	// Once ctx ends, scrapes in flight get 5 seconds to finish, and
	// serveMetrics returns when they have.
	drained := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(drained)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	})
	err := hs.Serve(ln)
	if stop() || !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-drained
	return nil
}
