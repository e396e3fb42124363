package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func load(t *testing.T) *results {
	t.Helper()
	f, err := os.Open("testdata/sample.txt")
	require.NoError(t, err)
	defer f.Close()
	r, err := parse(f)
	require.NoError(t, err)
	return r
}

func TestParse(t *testing.T) {
	r := load(t)
	assert.Equal(t, []string{"ResolveHit/n=10000", "PlanFor/n=128", "Memory/n=1000000"}, r.workloads,
		"names without impl= are not comparisons")
	assert.Equal(t, []string{"livereg", "floor-xsync", "floor-map", "rwmutex"}, r.impls)
	assert.Equal(t, []int{1, 2}, r.cpus, "no suffix means GOMAXPROCS 1")
	assert.Equal(t, "Test CPU @ 1.00GHz", r.config["cpu"])
	assert.Equal(t, "github.com/livereg/livereg/bench", r.config["pkg"])
	assert.Equal(t, []float64{10, 14, 12}, r.samples[key{"ResolveHit/n=10000", 1, "livereg"}][nsOp])
	assert.Equal(t, []float64{120.5}, r.samples[key{"Memory/n=1000000", 1, "livereg"}]["B/entry"])
}

func TestSplitName(t *testing.T) {
	for name, want := range map[string]key{
		"BenchmarkA/n=1/impl=floor-map":        {"A/n=1", 1, "floor-map"},
		"BenchmarkA/n=1/impl=floor-map-16":     {"A/n=1", 16, "floor-map"},
		"BenchmarkMixed/mix=90-5-5/impl=x-2":   {"Mixed/mix=90-5-5", 2, "x"},
		"BenchmarkB/impl=livereg/state=cached": {"B/state=cached", 1, "livereg"},
	} {
		got, ok := splitName(name)
		require.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	_, ok := splitName("BenchmarkNoImpl/n=1-2")
	assert.False(t, ok)
}

func TestMedianAndRatio(t *testing.T) {
	r := load(t)
	lv := key{"ResolveHit/n=10000", 1, "livereg"}
	m, ok := r.median(lv, nsOp)
	require.True(t, ok)
	assert.Equal(t, 12.0, m, "odd count: the middle sample")
	m, _ = r.median(key{"ResolveHit/n=10000", 1, "floor-xsync"}, nsOp)
	assert.Equal(t, 9.0, m, "even count: the mean of the middle two")

	ratio, ok := r.ratio(lv, key{"ResolveHit/n=10000", 1, "floor-xsync"}, nsOp)
	require.True(t, ok)
	assert.InDelta(t, 12.0/9.0, ratio, 1e-12)
	_, ok = r.ratio(lv, key{"ResolveHit/n=10000", 1, "rwmutex"}, nsOp)
	assert.False(t, ok, "rwmutex ran only at -cpu 2")
	assert.Equal(t, []float64{10, 14, 12}, r.samples[lv][nsOp], "median must not reorder the samples")
}

func TestJudge(t *testing.T) {
	r := load(t)
	got := map[string]verdict{}
	for _, v := range judge(r) {
		got[v.goal.text+"@"+string(rune('0'+v.cpu))] = v
	}
	xsync1 := got["Resolve hit, 10,000 entries: livereg at most 1.3x the raw xsync.MapOf.Load floor@1"]
	require.True(t, xsync1.ok)
	assert.InDelta(t, 12.0/9.0, xsync1.value, 1e-12)
	assert.False(t, xsync1.met, "1.33x is over 1.3x")

	xsync2 := got["Resolve hit, 10,000 entries: livereg at most 1.3x the raw xsync.MapOf.Load floor@2"]
	assert.True(t, xsync2.met, "6/5 = 1.2x")

	rw := got["Resolve hit, 10,000 entries: livereg at least 4x faster than the RWMutex map at -cpu 2 (rwmutex time / livereg time)@2"]
	assert.InDelta(t, 5.0, rw.value, 1e-12)
	assert.True(t, rw.met)
	_, judgedAt1 := got["Resolve hit, 10,000 entries: livereg at least 4x faster than the RWMutex map at -cpu 2 (rwmutex time / livereg time)@1"]
	assert.False(t, judgedAt1, "a goal for -cpu 2 is not judged at -cpu 1")

	allocs := got["PlanFor, 128 routes: 0 allocs/op@1"]
	require.True(t, allocs.ok)
	assert.False(t, allocs.met, "1 alloc/op fails a 0 allocs/op goal")
	plan := got["PlanFor, 128 routes: within 1.3x of the raw map floor@1"]
	assert.InDelta(t, 2.0, plan.value, 1e-12)

	missing := got["Register at full cap, 10,000 entries: at least 50x faster than the reference design@1"]
	assert.False(t, missing.ok, "no data is not a verdict")
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeMarkdown(&b, load(t), "make bench"))
	md := b.String()
	assert.Contains(t, md, "Test CPU @ 1.00GHz")
	assert.Contains(t, md, "`make bench`")
	assert.Contains(t, md, "| ResolveHit/n=10000 | 1 | 12.0 ns | 0 | 0.75x | 0.50x | – |",
		"floor-xsync 9/12, floor-map 6/12, rwmutex absent at -cpu 1")
	assert.Contains(t, md, "| ResolveHit/n=10000 | 2 | 6.0 ns | 0 | 0.83x | – | 5.00x |")
	assert.Contains(t, md, "| 1.33x | <= 1.3x | **no** |")
	assert.Contains(t, md, "| livereg | 120.5 |")
	assert.NotContains(t, md, "| Memory/n=1000000 | 1 |", "the memory workload is not a timing row")
	assert.NotContains(t, md, "Dispatch, trivial handler", "a goal about workloads the run did not have is left out")
	assert.Contains(t, md, "Resolve hit, 10,000 entries: 0 allocs/op", "a goal about a workload the run had stays")
}

func TestSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeSVG(&b, load(t)))
	dec := xml.NewDecoder(&b)
	bars, titles := 0, []string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart must be well-formed XML")
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "title" {
			bars++
		}
		if cd, ok := tok.(xml.CharData); ok && strings.Contains(string(cd), "-cpu") {
			titles = append(titles, string(cd))
		}
	}
	assert.Equal(t, 8, bars, "one bar per timed (workload, cpu, impl) cell; memory has none")
	assert.Contains(t, titles, "rwmutex, -cpu 2: 30.0 ns/op")
}

func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "t.md"), filepath.Join(dir, "c.svg")
	require.NoError(t, run("testdata/sample.txt", md, svg, ""))
	for _, p := range []string{md, svg} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, []byte("PASS\n"), 0o644))
	assert.Error(t, run(empty, md, "", ""), "a file with no comparisons is an error")
}

func TestFmtDecade(t *testing.T) {
	for d, want := range map[int]string{0: "1 ns", 1: "10 ns", 2: "100 ns", 3: "1 µs", 5: "100 µs", 6: "1 ms", 9: "1 s", 10: "10 s"} {
		assert.Equal(t, want, fmtDecade(d), "10^%d ns", d)
	}
}
