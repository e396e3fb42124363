package mcpserve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// BenchmarkSubscriptionRecheck measures what one death costs the table of
// subscriptions while n other URIs (of a living template) are subscribed:
// "per-death" is the re-check as it is, one lookup for the one URI the
// dead owner served; "full-scan" is the lookup of every subscribed URI
// that each resources list_changed used to cost.
func BenchmarkSubscriptionRecheck(b *testing.B) {
	for _, n := range []int{100, 10000} {
		cat, err := catalog.New(catalog.Config{})
		if err != nil {
			b.Fatal(err)
		}
		read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil }
		k, err := cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{URITemplate: "test://t/{id}", Name: "t"},
			bindsec.Plan{Public: true}, read)
		if err != nil {
			b.Fatal(err)
		}
		t := newSubscriptions(cat, slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.srv = mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		t.next = func(context.Context, string, mcp.Request) (mcp.Result, error) { return nil, nil }
		var ss *mcp.ServerSession // stands for one session; never used as one
		add := func(uri string) {
			o, ok := cat.ResourceOwner(uri)
			if !ok {
				b.Fatalf("%s not served", uri)
			}
			t.mu.Lock()
			t.byURI[uri] = &uriSubs{owner: o, sessions: map[*mcp.ServerSession]grant{ss: {by: o}}}
			t.indexLocked(uri, o)
			t.ix.total++
			t.mu.Unlock()
		}
		for i := range n {
			add(fmt.Sprintf("test://t/%d", i))
		}
		b.Run(fmt.Sprintf("per-death/%d", n), func(b *testing.B) {
			for i := range b.N {
				b.StopTimer()
				ctx, cancel := context.WithCancel(context.Background())
				uri := fmt.Sprintf("test://dies/%d", i)
				d, err := cat.StartResource(ctx, catalog.Resource{URI: uri}, bindsec.Plan{Public: true}, read)
				if err != nil {
					b.Fatal(err)
				}
				add(uri)
				cancel()
				<-d.Done()
				t.mu.Lock()
				t.ix.dirty[d.Owner()] = struct{}{}
				t.mu.Unlock()
				b.StartTimer()
				t.recheck()
			}
		})
		b.Run(fmt.Sprintf("full-scan/%d", n), func(b *testing.B) {
			for range b.N {
				t.mu.Lock()
				uris := make([]string, 0, len(t.byURI))
				for uri := range t.byURI {
					uris = append(uris, uri)
				}
				t.mu.Unlock()
				for _, uri := range uris {
					cat.ResourceOwner(uri)
				}
			}
		})
		_ = k.Stop(context.Background())
	}
}

// BenchmarkSubscriptionUpdate measures what the judgment of the grants
// adds to an update of a URI with n subscribers whose grants still pass:
// "send" is the update as it went out before subscriptions were judged
// (the SDK's ResourceUpdated, here with no session of its own to write
// to), "deliver" the update as it goes out now, when no principal
// expires, and "deliver-expiring" when every principal has an expiry
// yet to come, which costs a clock read; "check" is the judgment's part
// of "deliver" alone.
func BenchmarkSubscriptionUpdate(b *testing.B) {
	for _, n := range []int{1, 1000} {
		for _, expiring := range []bool{false, true} {
			cat, err := catalog.New(catalog.Config{Authenticator: bindsec.NewStaticTokens(nil)})
			if err != nil {
				b.Fatal(err)
			}
			read := func(context.Context, catalog.Read) (catalog.Contents, error) { return catalog.Contents{}, nil }
			k, err := cat.StartResource(context.Background(), catalog.Resource{URI: "test://u"}, bindsec.Plan{Roles: []string{"r"}}, read)
			if err != nil {
				b.Fatal(err)
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			t := newSubscriptions(cat, quiet)
			t.srv = mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{Logger: quiet})
			var expires time.Time
			if expiring {
				expires = time.Now().Add(time.Hour)
			}
			us := &uriSubs{owner: k.Owner(), sessions: map[*mcp.ServerSession]grant{}, gen: t.version()}
			for range n {
				// Stands for a session; never used as one.
				us.grantLocked(new(mcp.ServerSession), grant{cred: "c", expires: expires, by: k.Owner()})
			}
			t.byURI["test://u"] = us
			suffix := fmt.Sprintf("/%d", n)
			if expiring {
				suffix = "-expiring" + suffix
			}
			if !expiring {
				b.Run("send"+suffix, func(b *testing.B) {
					b.ReportAllocs()
					for range b.N {
						t.send("test://u")
					}
				})
			}
			b.Run("check"+suffix, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if _, stale := t.stale("test://u"); stale {
						b.Fatal("stale grants")
					}
				}
			})
			b.Run("deliver"+suffix, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					t.deliver("test://u")
				}
				if t.rejudged.Load() != 0 {
					b.Fatalf("%d grants judged again", t.rejudged.Load())
				}
			})
			_ = k.Stop(context.Background())
		}
	}
}
