package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/livereg/livereg/catalog"
)

// TestURILimit: a URI beyond Config.MaxURIBytes is refused with
// ErrInvalidArguments before any match, at every size, and fast; one at the
// limit is read.
func TestURILimit(t *testing.T) {
	tests := []struct {
		name string
		max  int
		size int
		want error
	}{
		{"default, at the limit", 0, catalog.DefaultMaxURIBytes, nil},
		{"default, one over", 0, catalog.DefaultMaxURIBytes + 1, catalog.ErrInvalidArguments},
		{"default, 3 MB", 0, 3 << 20, catalog.ErrInvalidArguments},
		{"configured, over", 100, 101, catalog.ErrInvalidArguments},
		{"no limit", -1, 64 << 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{MaxURIBytes: tt.max})
			startTemplate(t, c, bg, "test://t/{id}/data", tag("t", nil))
			uri := "test://t/" + strings.Repeat("a", tt.size-len("test://t//data")) + "/data"
			if got := len(uri); got != tt.size {
				t.Fatalf("len(uri) = %d, want %d", got, tt.size)
			}
			start := time.Now()
			_, err := c.ReadResource(bg, uri, "")
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got := time.Since(start); got >= 50*time.Millisecond {
				t.Errorf("a refused URI must cost no match: time.Since(start) = %v, want < %v", got, 50*time.Millisecond)
			}
			if got := err.Error(); !strings.Contains(got, fmt.Sprintf("has %d bytes, at most", tt.size)) {
				t.Errorf("the error says why: err.Error() = %q, want it to contain %q", got, fmt.Sprintf("has %d bytes, at most", tt.size))
			}
			if got := len(err.Error()); got >= 200 {
				t.Errorf("the error does not quote the URI: len(err.Error()) = %v, want < %v", got, 200)
			}
			_, ok := c.ResourceOwner(uri)
			if ok {
				t.Errorf("c.ResourceOwner(uri) found an entry")
			}
			_, err = c.Complete(bg, catalog.CompletionRequest{Kind: catalog.KindTemplate, Name: uri, Argument: "id"})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestTemplateVars: a body gets its variables decoded in Vars and as sent
// in RawVars; NUL and invalid UTF-8 are refused unless the template
// allows raw bytes.
func TestTemplateVars(t *testing.T) {
	tests := []struct {
		name     string
		tpl      string
		allowRaw bool
		uri      string
		vars     map[string]string
		raw      map[string]string
		want     error
	}{
		{"plain", "test://v/{id}/data", false, "test://v/abc/data",
			map[string]string{"id": "abc"}, map[string]string{"id": "abc"}, nil},
		{"decoded beside raw", "test://v/{id}/data", false, "test://v/..%2F..%2Fetc%2Fpasswd/data",
			map[string]string{"id": "../../etc/passwd"}, map[string]string{"id": "..%2F..%2Fetc%2Fpasswd"}, nil},
		{"NUL refused", "test://v/{id}/data", false, "test://v/a%00b/data", nil, nil, catalog.ErrInvalidArguments},
		{"invalid UTF-8 refused", "test://v/{id}/data", false, "test://v/a%FFb/data", nil, nil, catalog.ErrInvalidArguments},
		{"NUL allowed", "test://v/{id}/data", true, "test://v/a%00b/data",
			map[string]string{"id": "a\x00b"}, map[string]string{"id": "a%00b"}, nil},
		{"invalid UTF-8 allowed", "test://v/{id}/data", true, "test://v/%FF/data",
			map[string]string{"id": "\xff"}, map[string]string{"id": "%FF"}, nil},
		{"literal percent", "test://v/a%20b/{id}", false, "test://v/a%20b/x%2Fy",
			map[string]string{"id": "x/y"}, map[string]string{"id": "x%2Fy"}, nil},
		{"query list", "test://v/q{?a,b}", false, "test://v/q?a=1%2C2&b=%41",
			map[string]string{"a": "1,2", "b": "A"}, map[string]string{"a": "1%2C2", "b": "%41"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, catalog.Config{})
			var got catalog.Read
			rd := func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
				got = r
				return catalog.Contents{Text: "ok"}, nil
			}
			k, err := c.StartResourceTemplate(bg, catalog.ResourceTemplate{URITemplate: tt.tpl, AllowRawBytes: tt.allowRaw}, public, rd)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.Stop(bg) })
			_, err = c.ReadResource(bg, tt.uri, "")
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				if got := err.Error(); !strings.Contains(got, "does not allow raw bytes") {
					t.Errorf("err.Error() = %q, want it to contain %q", got, "does not allow raw bytes")
				}
				if got.Vars != nil {
					t.Errorf("the reader must not run: got.Vars = %v, want nil", got.Vars)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Vars, tt.vars) {
				t.Errorf("got.Vars = %v, want %v", got.Vars, tt.vars)
			}
			if !reflect.DeepEqual(got.RawVars, tt.raw) {
				t.Errorf("got.RawVars = %v, want %v", got.RawVars, tt.raw)
			}
		})
	}
}

// BenchmarkTemplateMatchPerByte: what a templated read costs per byte of
// its URI, from 64 B to the default limit. ns/op divided by the size is
// the figure the README states.
func BenchmarkTemplateMatchPerByte(b *testing.B) {
	for _, size := range []int{64, 512, 1 << 10, 4 << 10, 8 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			c := newCatalog(b, catalog.Config{})
			startTemplate(b, c, bg, "test://b/{id}/data", tag("b", nil))
			uri := "test://b/" + strings.Repeat("a", size-len("test://b//data")) + "/data"
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := c.ReadResource(bg, uri, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/byte")
		})
	}
}
