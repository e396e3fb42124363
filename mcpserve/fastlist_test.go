package mcpserve_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// listNames walks every page of tools/list on the fast path and returns
// the names listed.
func listNames(t *testing.T, p *twoPaths, v string) []string {
	t.Helper()
	var names []string
	cursor := ""
	for range 100 {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		a := p.send(t, p.fast.URL, fastCase{"list", "tools/list", params, "", true}.exchange(v, 1))
		raw, _ := json.Marshal(a.messages)
		var msgs []struct {
			Result struct {
				Tools      []struct{ Name string } `json:"tools"`
				NextCursor string                  `json:"nextCursor"`
			} `json:"result"`
		}
		if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) != 1 {
			t.Fatalf("tools/list answered %s", raw)
		}
		for _, tl := range msgs[0].Result.Tools {
			names = append(names, tl.Name)
		}
		if cursor = msgs[0].Result.NextCursor; cursor == "" {
			return names
		}
	}
	t.Fatal("the listing never ended")
	return nil
}

// TestFastPathListingNeverStale: the fast path's cached listing pages
// change with the catalog at once: a tool started, a tool stopped, and a
// tool whose owner died (before its entry is reclaimed) show in the next
// listing, every page of it, at each revision.
func TestFastPathListingNeverStale(t *testing.T) {
	p := newTwoPaths(t)
	for _, v := range fastVersions {
		t.Run(v, func(t *testing.T) {
			base := listNames(t, p, v)
			if again := listNames(t, p, v); !slices.Equal(again, base) {
				t.Fatalf("a listing read twice: %v, then %v", base, again)
			}
			ctx, kill := context.WithCancel(context.Background())
			k, err := p.cat.StartTool(ctx, catalog.Tool{Name: "aaa-new"}, bindsec.Plan{Public: true},
				func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("x"), nil })
			if err != nil {
				t.Fatal(err)
			}
			if got := listNames(t, p, v); !slices.Contains(got, "aaa-new") || len(got) != len(base)+1 {
				t.Fatalf("after a start: %v", got)
			}
			kill()
			<-k.Done()
			if got := listNames(t, p, v); slices.Contains(got, "aaa-new") || !slices.Equal(got, base) {
				t.Fatalf("after its owner died: %v", got)
			}
			k2, err := p.cat.StartTool(context.Background(), catalog.Tool{Name: "zzz-last"}, bindsec.Plan{Public: true},
				func(context.Context, catalog.Call) (catalog.Result, error) { return catalog.TextResult("x"), nil })
			if err != nil {
				t.Fatal(err)
			}
			if got := listNames(t, p, v); !slices.Contains(got, "zzz-last") {
				t.Fatalf("after a start: %v", got)
			}
			if err := k2.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := listNames(t, p, v); !slices.Equal(got, base) {
				t.Fatalf("after a stop: %v, want %v", got, base)
			}
		})
	}
}
