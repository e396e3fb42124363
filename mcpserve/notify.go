package mcpserve

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/catalog"
)

// notifier is the one goroutine per Server that turns catalog changes into
// coalesced list_changed notifications; see the package doc.
type notifier struct {
	cat       *catalog.Catalog
	window    func(stop <-chan struct{}) bool // waits out one coalescing window
	tools     func()                          // sends tools/list_changed
	resources func()                          // sends resources/list_changed
	prompts   func()                          // sends prompts/list_changed; nil: none

	// afterRead, a test hook (nil in production), runs on run's goroutine
	// right after it read the versions and before it waits: a change made
	// there must still be announced. Copied from testHookAfterRead when
	// the notifier is made.
	afterRead func()

	// seenTools and seenResources are the versions the last notification
	// of each kind covered. Only run writes them; poke reads them.
	seenTools, seenResources atomic.Uint64
	seenPrompts              atomic.Uint64

	kick     chan struct{} // capacity 1: "look again"
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newNotifier(cat *catalog.Catalog, window func(<-chan struct{}) bool, tools, resources func()) *notifier {
	n := &notifier{
		cat: cat, window: window, tools: tools, resources: resources,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),

		afterRead: testHookAfterRead,
	}
	// What exists before the first session needs no notification: a
	// client lists after it connects.
	n.seenTools.Store(cat.Tools().Version())
	n.seenResources.Store(resourcesVersion(cat))
	n.seenPrompts.Store(cat.Prompts().Version())
	return n
}

// run follows the catalog until close. The channel is taken before the
// versions are read, so a change after the read closes the channel being
// waited on and none is missed.
func (n *notifier) run() {
	defer close(n.done)
	for {
		changes := n.cat.Changes()
		tools, resources, prompts := n.versions()
		sent := false
		if tools != n.seenTools.Load() {
			n.seenTools.Store(tools)
			n.tools()
			sent = true
		}
		if resources != n.seenResources.Load() {
			n.seenResources.Store(resources)
			n.resources()
			sent = true
		}
		if prompts != n.seenPrompts.Load() && n.prompts != nil {
			n.seenPrompts.Store(prompts)
			n.prompts()
			sent = true
		}
		if sent {
			// Hold off; whatever changes meanwhile goes out in one
			// notification when the window ends.
			if !n.window(n.stop) {
				return
			}
			continue
		}
		select {
		case <-changes:
		case <-n.kick:
		case <-n.stop:
			return
		}
	}
}

// versions reads what run compares with what it announced last.
func (n *notifier) versions() (tools, resources, prompts uint64) {
	tools, resources, prompts = n.cat.Tools().Version(), resourcesVersion(n.cat), n.cat.Prompts().Version()
	if n.afterRead != nil {
		n.afterRead()
	}
	return tools, resources, prompts
}

// testHookAfterRead is the afterRead of the notifiers made while it is
// set; only tests set it, before they make a Server.
var testHookAfterRead func()

// poke makes run look again if a version moved that it has not covered. A
// request handler calls it after a lookup or listing that may have
// reclaimed a dead entry itself: such a reclaim bumps the version, and the
// catalog closes its Changes channel only for reclaims it makes on the
// owner's death, which then finds the entry gone. Cheap: two atomic loads
// per version, and a send only when something moved.
func (n *notifier) poke() {
	if n.cat.Tools().Version() == n.seenTools.Load() && resourcesVersion(n.cat) == n.seenResources.Load() &&
		(n.prompts == nil || n.cat.Prompts().Version() == n.seenPrompts.Load()) {
		return
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// close stops run and waits for it to return. Idempotent.
func (n *notifier) close() {
	n.stopOnce.Do(func() { close(n.stop) })
	<-n.done
}

// timerWindow is the production coalescing wait: a timer armed only after a
// notification was sent.
func timerWindow(d time.Duration) func(stop <-chan struct{}) bool {
	return func(stop <-chan struct{}) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
}

// The SDK sends list_changed only when its own tool or resource table
// changes. These sentinels are re-added to trigger that send; they are never
// listed or called, because the middleware answers those methods from the
// catalog.
var (
	sentinelTool = &mcp.Tool{
		Name:        "livereg.mcpserve.list_changed",
		Description: "internal: never listed",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}
	sentinelResource = &mcp.Resource{URI: "livereg-internal:list-changed", Name: "list-changed"}
)

func sentinelToolHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return errorResult("internal"), nil
}

func sentinelResourceHandler(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, mcp.ResourceNotFoundError(r.Params.URI)
}

func (s *Server) toolsChanged() {
	s.log.Debug("mcpserve: tools changed; notifying sessions", "version", s.cat.Tools().Version())
	s.mcp.AddTool(sentinelTool, sentinelToolHandler)
}

// resourcesVersion is what resources list_changed covers: fixed resources
// and templates, which MCP gives no notification of their own.
func resourcesVersion(cat *catalog.Catalog) uint64 {
	return cat.Resources().Version() + cat.Templates().Version()
}

func (s *Server) resourcesChanged() {
	s.log.Debug("mcpserve: resources changed; notifying sessions", "version", s.cat.Resources().Version())
	s.mcp.AddResource(sentinelResource, sentinelResourceHandler)
}
