package etcdfleet_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

func resourceListed(c *catalog.Catalog, uri string) bool {
	return slices.ContainsFunc(c.Resources().List(), func(r catalog.Resource) bool { return r.URI == uri })
}

// startWatched starts on s a public resource uri whose consumer publishes
// updates; the test stops it.
func (s *served) startWatched(t *testing.T, ctx context.Context, uri string) *catalog.Consumer {
	t.Helper()
	k, err := s.cat.StartResource(ctx, catalog.Resource{URI: uri, Name: "watched"}, bindsec.Plan{Public: true},
		func(context.Context, catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: "now"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	s.keep(k)
	return k
}

// A session of replica b subscribed to a resource replica c holds hears
// c's updates, over a real etcd. Once c's consumer died its publishes
// are refused and the subscription is dropped: a successor's update on
// replica a reaches the session only after it subscribes again.
func TestSubscriptionAcrossTheFleet(t *testing.T) {
	ep := startEtcd(t)
	a, b, c := newServed(t, ep, "a"), newServed(t, ep, "b"), newServed(t, ep, "c")
	const uri = "file:///watched"
	life := lifeFor(t)
	kctx, kill := context.WithCancel(life)
	k := c.startWatched(t, kctx, uri)
	waitListed(t, b.cat, "c's resource listed on b", func() bool { return resourceListed(b.cat, uri) })

	heard := make(chan string, 16)
	cl := mcp.NewClient(&mcp.Implementation{Name: "fleet-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { heard <- r.Params.URI },
	})
	ctx := ctxFor(t)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe through b to c's resource: %v", err)
	}
	published := time.Now()
	if err := k.Updated(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-heard:
		t.Logf("c's update heard through b %v after it was published", time.Since(published).Round(time.Microsecond))
		if got != uri {
			t.Fatalf("heard an update of %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("c's update never reached b's subscriber")
	}

	kill()
	waitDone(t, k)
	if err := k.Updated(); !errors.Is(err, catalog.ErrDeadOwner) {
		t.Fatalf("a dead consumer published: %v", err)
	}
	waitListed(t, b.cat, "c's resource gone from b", func() bool { return !resourceListed(b.cat, uri) })
	// The drop is told once; nothing after it.
	drain := time.After(500 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-heard:
		case <-drain:
			done = true
		}
	}
	succ := a.startWatched(t, life, uri)
	waitListed(t, b.cat, "a's successor listed on b", func() bool { return resourceListed(b.cat, uri) })
	if err := succ.Updated(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
		t.Fatal("a dropped subscription heard a successor's update")
	case <-time.After(300 * time.Millisecond):
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe again, to a's successor: %v", err)
	}
	if err := succ.Updated(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(5 * time.Second):
		t.Fatal("the successor's update never reached the subscriber that subscribed again")
	}
}
