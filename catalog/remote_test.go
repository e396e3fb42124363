package catalog_test

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/livereg/livereg/catalog"
)

// fleetList is a catalog.Remote whose listings a test sets: what other
// replicas hold, as package etcdfleet's follower would report it.
type fleetList struct {
	mu        sync.Mutex
	tools     []catalog.Tool
	resources []catalog.Resource
	tv, rv    uint64
	watchers  []func()
}

func (f *fleetList) Tools() []catalog.Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tools
}

func (f *fleetList) Resources() []catalog.Resource {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resources
}

func (f *fleetList) ToolsVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tv
}

func (f *fleetList) ResourcesVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rv
}

func (f *fleetList) Watch(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers = append(f.watchers, fn)
}

// setTools replaces the remote tools (given sorted) and reports the change.
func (f *fleetList) setTools(names ...string) {
	f.mu.Lock()
	f.tools = nil
	for _, n := range names {
		f.tools = append(f.tools, catalog.Tool{Name: n, Description: "remote " + n})
	}
	f.tv++
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, w := range watchers {
		w()
	}
}

func (f *fleetList) setResources(uris ...string) {
	f.mu.Lock()
	f.resources = nil
	for _, u := range uris {
		f.resources = append(f.resources, catalog.Resource{URI: u, Name: "remote"})
	}
	f.rv++
	watchers := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, w := range watchers {
		w()
	}
}

// The listing is the fleet's: local and remote routes, sorted, a name
// held in both listed once as the local route describes it.
func TestRemoteMergedIntoListings(t *testing.T) {
	for _, tc := range []struct {
		name          string
		local, remote []string
		want          []string
	}{
		{"remote only", nil, []string{"a", "b"}, []string{"a", "b"}},
		{"local only", []string{"a", "b"}, nil, []string{"a", "b"}},
		{"interleaved", []string{"b", "d"}, []string{"a", "c", "e"}, []string{"a", "b", "c", "d", "e"}},
		{"own claims listed once", []string{"b", "c"}, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{"neither", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := &fleetList{}
			c := newCatalog(t, catalog.Config{Remote: fl})
			for _, n := range tc.local {
				startTool(t, c, bg, n, public, reply(n))
			}
			fl.setTools(tc.remote...)
			got := toolNames(c)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got = %v, want %v", got, tc.want)
			}
			for _, tl := range c.Tools().List() {
				if slices.Contains(tc.local, tl.Name) {
					if len(tl.Description) != 0 {
						t.Errorf("%s: the local route describes a name held here: tl.Description = %v, want empty", tl.Name, tl.Description)
					}
				}
			}
		})
	}
}

// A change on another replica moves Version and ToolsVersion and closes
// Changes, which is what makes a server send list_changed; resources move
// only their own version.
func TestRemoteChangeNotifies(t *testing.T) {
	fl := &fleetList{}
	c := newCatalog(t, catalog.Config{Remote: fl})
	if got := len(fl.watchers); got != 1 {
		t.Fatalf("New watches its Remote: len(fl.watchers) = %d, want %d", got, 1)
	}

	changes, tv, rv := c.Changes(), c.Tools().Version(), c.Resources().Version()
	fl.setTools("elsewhere")
	select {
	case <-changes:
	default:
		t.Fatal("a remote change did not close Changes")
	}
	if got := c.Tools().Version(); got <= tv {
		t.Errorf("c.Tools().Version() = %v, want > %v", got, tv)
	}
	if got := c.Resources().Version(); got != rv {
		t.Errorf("c.Resources().Version() = %v, want %v", got, rv)
	}
	if got, want := toolNames(c), ([]string{"elsewhere"}); !reflect.DeepEqual(got, want) {
		t.Errorf("toolNames(c) = %v, want %v", got, want)
	}

	fl.setTools() // the consumer on the other replica died
	if len(toolNames(c)) != 0 {
		t.Errorf("toolNames(c) = %v, want empty", toolNames(c))
	}

	fl.setResources("file:///r")
	if got := c.Resources().Version(); got <= rv {
		t.Errorf("c.Resources().Version() = %v, want > %v", got, rv)
	}
	if got := len(c.Resources().List()); got != 1 {
		t.Fatalf("len(c.Resources().List()) = %d, want %d", got, 1)
	}
	if got := c.Resources().List()[0].URI; got != "file:///r" {
		t.Errorf("c.Resources().List()[0].URI = %q, want \"file:///r\"", got)
	}
}

// While neither side changes, a merged listing is the same shared slice,
// made without allocating; a change on either side makes a new one.
func TestRemoteListingCached(t *testing.T) {
	fl := &fleetList{}
	c := newCatalog(t, catalog.Config{Remote: fl})
	startTool(t, c, bg, "local", public, reply("x"))
	fl.setTools("remote")
	first := c.Tools().List()
	if got := testing.AllocsPerRun(100, func() { _ = c.Tools().List() }); got != 0 {
		t.Errorf("testing.AllocsPerRun(100, func() { _ = c.Tools().List() }) = %v, want 0", got)
	}
	if &first[0] != &c.Tools().List()[0] {
		t.Errorf("&c.Tools().List()[0] is not the same pointer as &first[0]")
	}

	fl.setTools("remote", "remote2")
	if got := len(c.Tools().List()); got != 3 {
		t.Errorf("len(c.Tools().List()) = %d, want %d", got, 3)
	}
	startTool(t, c, bg, "local2", public, reply("y"))
	if got, want := toolNames(c), ([]string{"local", "local2", "remote", "remote2"}); !reflect.DeepEqual(got, want) {
		t.Errorf("toolNames(c) = %v, want %v", got, want)
	}
}

// Pages walk the merged listing with the registry's cursors; a cursor not
// made by a pager is refused.
func TestRemotePages(t *testing.T) {
	fl := &fleetList{}
	c := newCatalog(t, catalog.Config{Remote: fl})
	for _, n := range []string{"b", "d", "f"} {
		startTool(t, c, bg, n, public, reply(n))
	}
	fl.setTools("a", "c", "e", "g")
	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages >= 10 {
			t.Fatalf("the walk does not end: pages = %v, want < %v", pages, 10)
		}
		tools, next, err := c.Tools().Page(cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			walked = append(walked, tl.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if want := ([]string{"a", "b", "c", "d", "e", "f", "g"}); !reflect.DeepEqual(walked, want) {
		t.Errorf("walked = %v, want %v", walked, want)
	}

	_, _, err := c.Tools().Page("not a cursor", 3)
	if !errors.Is(err, catalog.ErrInvalidCursor) {
		t.Errorf("err = %v, want catalog.ErrInvalidCursor", err)
	}
}

// Calls are not forwarded: a route held only elsewhere is unknown here.
func TestRemoteRouteNotCallableHere(t *testing.T) {
	fl := &fleetList{}
	c := newCatalog(t, catalog.Config{Remote: fl})
	fl.setTools("elsewhere")
	_, err := callText(t, c, "elsewhere", "")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("err = %v, want catalog.ErrNotFound", err)
	}
}
