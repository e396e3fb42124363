package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func load(t *testing.T) *results {
	t.Helper()
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParse(t *testing.T) {
	r := load(t)
	if got, want := r.workloads, []string{"ResolveHit/n=10000", "PlanFor/n=128", "Memory/n=1000000"}; !slices.Equal(got, want) {
		t.Errorf("names without impl= are not comparisons: r.workloads = %v, want %v", got, want)
	}
	if got, want := r.impls, []string{"livereg", "floor-xsync", "floor-map", "rwmutex"}; !slices.Equal(got, want) {
		t.Errorf("r.impls = %v, want %v", got, want)
	}
	if got, want := r.cpus, []int{1, 2}; !slices.Equal(got, want) {
		t.Errorf("no suffix means GOMAXPROCS 1: r.cpus = %v, want %v", got, want)
	}
	if got, want := r.config["cpu"], "Test CPU @ 1.00GHz"; got != want {
		t.Errorf("r.config[\"cpu\"] = %v, want %v", got, want)
	}
	if got, want := r.config["pkg"], "github.com/livereg/livereg/bench"; got != want {
		t.Errorf("r.config[\"pkg\"] = %v, want %v", got, want)
	}
	if got, want := r.samples[key{"ResolveHit/n=10000", 1, "livereg"}][nsOp], []float64{10, 14, 12}; !slices.Equal(got, want) {
		t.Errorf("r.samples[key{\"ResolveHit/n=10000\", 1, \"livereg\"}][nsOp] = %v, want %v", got, want)
	}
	if got, want := r.samples[key{"Memory/n=1000000", 1, "livereg"}]["B/entry"], []float64{120.5}; !slices.Equal(got, want) {
		t.Errorf("r.samples[key{\"Memory/n=1000000\", 1, \"livereg\"}][\"B/entry\"] = %v, want %v", got, want)
	}
}

func TestSplitName(t *testing.T) {
	for name, want := range map[string]key{
		"BenchmarkA/n=1/impl=floor-map":        {"A/n=1", 1, "floor-map"},
		"BenchmarkA/n=1/impl=floor-map-16":     {"A/n=1", 16, "floor-map"},
		"BenchmarkMixed/mix=90-5-5/impl=x-2":   {"Mixed/mix=90-5-5", 2, "x"},
		"BenchmarkB/impl=livereg/state=cached": {"B/state=cached", 1, "livereg"},
	} {
		got, ok := splitName(name)
		if !ok {
			t.Fatalf("%v: ok = %v, want %v", name, false, true)
		}
		if got, want := got, want; got != want {
			t.Errorf("%v: got = %v, want %v", name, got, want)
		}
	}
	_, ok := splitName("BenchmarkNoImpl/n=1-2")
	if ok {
		t.Errorf("ok = %v, want %v", true, false)
	}
}

func TestMedianAndRatio(t *testing.T) {
	r := load(t)
	lv := key{"ResolveHit/n=10000", 1, "livereg"}
	m, ok := r.median(lv, nsOp)
	if !ok {
		t.Fatalf("ok = %v, want %v", false, true)
	}
	if got, want := m, 12.0; got != want {
		t.Errorf("odd count: the middle sample: m = %v, want %v", got, want)
	}
	m, _ = r.median(key{"ResolveHit/n=10000", 1, "floor-xsync"}, nsOp)
	if got, want := m, 9.0; got != want {
		t.Errorf("even count: the mean of the middle two: m = %v, want %v", got, want)
	}

	ratio, ok := r.ratio(lv, key{"ResolveHit/n=10000", 1, "floor-xsync"}, nsOp)
	if !ok {
		t.Fatalf("ok = %v, want %v", false, true)
	}
	if got, want := ratio, 12.0/9.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("ratio = %v, want %v", got, want)
	}
	_, ok = r.ratio(lv, key{"ResolveHit/n=10000", 1, "rwmutex"}, nsOp)
	if ok {
		t.Errorf("rwmutex ran only at -cpu 2: ok = %v, want %v", true, false)
	}
	if got, want := r.samples[lv][nsOp], []float64{10, 14, 12}; !slices.Equal(got, want) {
		t.Errorf("median must not reorder the samples: r.samples[lv][nsOp] = %v, want %v", got, want)
	}
}

func TestJudge(t *testing.T) {
	r := load(t)
	got := map[string]verdict{}
	for _, v := range judge(r) {
		got[v.goal.text+"@"+string(rune('0'+v.cpu))] = v
	}
	xsync1 := got["Resolve hit, 10,000 entries: livereg at most 1.3x the raw xsync.MapOf.Load floor@1"]
	if !xsync1.ok {
		t.Fatalf("xsync1.ok = %v, want %v", false, true)
	}
	if got, want := xsync1.value, 12.0/9.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("xsync1.value = %v, want %v", got, want)
	}
	if xsync1.met {
		t.Errorf("1.33x is over 1.3x: xsync1.met = %v, want %v", true, false)
	}

	xsync2 := got["Resolve hit, 10,000 entries: livereg at most 1.3x the raw xsync.MapOf.Load floor@2"]
	if !xsync2.met {
		t.Errorf("6/5 = 1.2x: xsync2.met = %v, want %v", false, true)
	}

	rw := got["Resolve hit, 10,000 entries: livereg at least 4x faster than the RWMutex map at -cpu 2 (rwmutex time / livereg time)@2"]
	if got, want := rw.value, 5.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("rw.value = %v, want %v", got, want)
	}
	if !rw.met {
		t.Errorf("rw.met = %v, want %v", false, true)
	}
	_, judgedAt1 := got["Resolve hit, 10,000 entries: livereg at least 4x faster than the RWMutex map at -cpu 2 (rwmutex time / livereg time)@1"]
	if judgedAt1 {
		t.Errorf("a goal for -cpu 2 is not judged at -cpu 1: judgedAt1 = %v, want %v", true, false)
	}

	allocs := got["PlanFor, 128 routes: 0 allocs/op@1"]
	if !allocs.ok {
		t.Fatalf("allocs.ok = %v, want %v", false, true)
	}
	if allocs.met {
		t.Errorf("1 alloc/op fails a 0 allocs/op goal: allocs.met = %v, want %v", true, false)
	}
	plan := got["PlanFor, 128 routes: within 1.3x of the raw map floor@1"]
	if got, want := plan.value, 2.0; math.Abs(got-want) > 1e-12 {
		t.Errorf("plan.value = %v, want %v", got, want)
	}

	missing := got["Register at full cap, 10,000 entries: at least 50x faster than the reference design@1"]
	if missing.ok {
		t.Errorf("no data is not a verdict: missing.ok = %v, want %v", true, false)
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := writeMarkdown(&b, load(t), "make bench"); err != nil {
		t.Fatalf("writeMarkdown(&b, load(t), \"make bench\"): %v", err)
	}
	md := b.String()
	if !strings.Contains(md, "Test CPU @ 1.00GHz") {
		t.Errorf("%q lacks %q", md, "Test CPU @ 1.00GHz")
	}
	if !strings.Contains(md, "`make bench`") {
		t.Errorf("%q lacks %q", md, "`make bench`")
	}
	if !strings.Contains(md, "| ResolveHit/n=10000 | 1 | 12.0 ns | 0 | 0.75x | 0.50x | – |") {
		t.Errorf("floor-xsync 9/12, floor-map 6/12, rwmutex absent at -cpu 1: %q lacks %q", md, "| ResolveHit/n=10000 | 1 | 12.0 ns | 0 | 0.75x | 0.50x | – |")
	}
	if !strings.Contains(md, "| ResolveHit/n=10000 | 2 | 6.0 ns | 0 | 0.83x | – | 5.00x |") {
		t.Errorf("%q lacks %q", md, "| ResolveHit/n=10000 | 2 | 6.0 ns | 0 | 0.83x | – | 5.00x |")
	}
	if !strings.Contains(md, "| 1.33x | <= 1.3x | **no** |") {
		t.Errorf("%q lacks %q", md, "| 1.33x | <= 1.3x | **no** |")
	}
	if !strings.Contains(md, "| livereg | 120.5 |") {
		t.Errorf("%q lacks %q", md, "| livereg | 120.5 |")
	}
	if strings.Contains(md, "| Memory/n=1000000 | 1 |") {
		t.Errorf("the memory workload is not a timing row: %q has %q", md, "| Memory/n=1000000 | 1 |")
	}
	if strings.Contains(md, "Dispatch, trivial handler") {
		t.Errorf("a goal about workloads the run did not have is left out: %q has %q", md, "Dispatch, trivial handler")
	}
	if !strings.Contains(md, "Resolve hit, 10,000 entries: 0 allocs/op") {
		t.Errorf("a goal about a workload the run had stays: %q lacks %q", md, "Resolve hit, 10,000 entries: 0 allocs/op")
	}
}

func TestSVG(t *testing.T) {
	var b bytes.Buffer
	if err := writeSVG(&b, load(t)); err != nil {
		t.Fatalf("writeSVG(&b, load(t)): %v", err)
	}
	dec := xml.NewDecoder(&b)
	bars, titles := 0, []string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the chart must be well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "title" {
			bars++
		}
		if cd, ok := tok.(xml.CharData); ok && strings.Contains(string(cd), "-cpu") {
			titles = append(titles, string(cd))
		}
	}
	if got, want := bars, 8; got != want {
		t.Errorf("one bar per timed (workload, cpu, impl) cell; memory has none: bars = %v, want %v", got, want)
	}
	if !slices.Contains(titles, "rwmutex, -cpu 2: 30.0 ns/op") {
		t.Errorf("%q lacks %q", titles, "rwmutex, -cpu 2: 30.0 ns/op")
	}
}

func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "t.md"), filepath.Join(dir, "c.svg")
	if err := run("testdata/sample.txt", md, svg, ""); err != nil {
		t.Fatalf("run(\"testdata/sample.txt\", md, svg, \"\"): %v", err)
	}
	for _, p := range []string{md, svg} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Size(); got <= 0 {
			t.Errorf("st.Size() = %v, want > 0", got)
		}
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\n"), 0o644); err != nil {
		t.Fatalf("os.WriteFile(empty, []byte(\"PASS\\n\"), 0o644): %v", err)
	}
	if run(empty, md, "", "") == nil {
		t.Errorf("a file with no comparisons is an error: run(empty, md, \"\", \"\") = nil, want an error")
	}
}

func TestFmtDecade(t *testing.T) {
	for d, want := range map[int]string{0: "1 ns", 1: "10 ns", 2: "100 ns", 3: "1 µs", 5: "100 µs", 6: "1 ms", 9: "1 s", 10: "10 s"} {
		if got, want := fmtDecade(d), want; got != want {
			t.Errorf("10^%d ns: fmtDecade(d) = %v, want %v", d, got, want)
		}
	}
}

// A goal on a difference judges num - den, and prints it in microseconds.
func TestJudgeDifference(t *testing.T) {
	r, err := parse(strings.NewReader(`pkg: github.com/livereg/livereg/cmd/wirebench
BenchmarkWireCall/clients=1/impl=livereg-stateless-1	100	90000 ns/op	80000 p50-ns
BenchmarkWireCall/clients=1/impl=livereg-forward-1	100	200000 ns/op	190000 p50-ns
BenchmarkWireCall/clients=1/impl=livereg-forward-1	100	300000 ns/op	250000 p50-ns
BenchmarkWireCall/clients=1/impl=livereg-forward-1	100	210000 ns/op	200000 p50-ns
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range judge(r) {
		if !v.goal.diff {
			continue
		}
		// The median forward, 200 µs, over the local 80 µs.
		if !v.ok || v.value != 120e3 || !v.met {
			t.Errorf("%s: value %v, ok %v, met %v; want +120 µs, met", v.goal.text, v.value, v.ok, v.met)
		}
		if got := fmtMeasured(v); got != "+120 µs" {
			t.Errorf("fmtMeasured = %q, want %q", got, "+120 µs")
		}
		if got := fmtLimit(v.goal); got != "+150 µs" {
			t.Errorf("fmtLimit = %q, want %q", got, "+150 µs")
		}
		return
	}
	t.Fatal("no goal on a difference")
}
