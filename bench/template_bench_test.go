package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/yosida95/uritemplate/v3"

	"github.com/livereg/livereg/bindsec"
	"github.com/livereg/livereg/catalog"
)

// templateCount is how many live templates BenchmarkTemplateRead holds.
const templateCount = 1000

// BenchmarkTemplateRead is the cost of a resources/read of a templated URI
// (catalog.ReadResource: the fixed-resource miss, the template match, the plan
// guard, the gate and the reader) with 1,000 live templates, beside the
// naive design run in the same process: every template matched against
// the URI, in turn, on every read, and the best match kept.
//
//   - case=distinct: each template has its own literal prefix
//     ("bench://svc-0042/items/{id}"), as templates of different
//     consumers do; the index matches one candidate.
//   - case=shared-prefix: every template starts "bench://svc/" and differs
//     after its first expression ("bench://svc/{id}/t0042"); the index
//     narrows nothing and matches candidates best first until one
//     matches, the index's worst case.
func BenchmarkTemplateRead(b *testing.B) {
	for _, tc := range []struct {
		name     string
		template func(i int) string
		uri      string
	}{
		{"distinct", func(i int) string { return fmt.Sprintf("bench://svc-%04d/items/{id}", i) }, "bench://svc-0500/items/42"},
		{"shared-prefix", func(i int) string { return fmt.Sprintf("bench://svc/{id}/t%04d", i) }, "bench://svc/42/t0500"},
	} {
		reader := func(_ context.Context, r catalog.Read) (catalog.Contents, error) {
			return catalog.Contents{Text: r.Vars["id"]}, nil
		}
		b.Run("case="+tc.name+"/impl=livereg", func(b *testing.B) {
			cat, err := catalog.New(catalog.Config{MaxTemplates: templateCount})
			if err != nil {
				b.Fatal(err)
			}
			var ks []*catalog.Consumer
			for i := range templateCount {
				k, err := cat.StartResourceTemplate(context.Background(), catalog.ResourceTemplate{URITemplate: tc.template(i)},
					bindsec.Plan{Public: true}, reader)
				if err != nil {
					b.Fatal(err)
				}
				ks = append(ks, k)
			}
			defer func() {
				for _, k := range ks {
					_ = k.Stop(context.Background())
				}
			}()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := cat.ReadResource(ctx, tc.uri, "")
				if err != nil || res.Text != "42" {
					b.Fatalf("read %s: %q, %v", tc.uri, res.Text, err)
				}
			}
		})
		b.Run("case="+tc.name+"/impl=naive-scan", func(b *testing.B) {
			tmpls := make([]*uritemplate.Template, templateCount)
			for i := range tmpls {
				tmpls[i] = uritemplate.MustNew(tc.template(i))
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var best uritemplate.Values
				for _, t := range tmpls {
					if v := t.Match(tc.uri); v != nil && best == nil {
						best = v
					}
				}
				vars := map[string]string{"id": best.Get("id").String()}
				res, err := reader(ctx, catalog.Read{URI: tc.uri, Vars: vars})
				if err != nil || res.Text != "42" {
					b.Fatalf("read %s: %q, %v", tc.uri, res.Text, err)
				}
			}
		})
	}
}
