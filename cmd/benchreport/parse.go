package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// key identifies one cell of the comparison: a workload (the benchmark name
// without "Benchmark", its impl= part and its -cpu suffix), a GOMAXPROCS and
// an implementation.
type key struct {
	workload string
	cpu      int
	impl     string
}

// results holds every sample of a results file, in the Go benchmark format.
type results struct {
	config    map[string]string // goos, goarch, cpu, pkg: the last value seen
	samples   map[key]map[string][]float64
	workloads []string // in order of first appearance
	impls     []string
	cpus      []int
}

var cpuSuffix = regexp.MustCompile(`-(\d+)$`)

// parse reads benchmark lines ("BenchmarkX/k=v/impl=name-2  N  v unit ...")
// and the configuration lines before them; anything else is ignored, as
// benchstat does. Lines without an impl= part are not comparisons and are
// skipped too.
func parse(r io.Reader) (*results, error) {
	res := &results{config: map[string]string{}, samples: map[key]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if k, v, ok := strings.Cut(text, ": "); ok && !strings.HasPrefix(text, "Benchmark") && !strings.ContainsAny(k, " \t") {
			res.config[k] = strings.TrimSpace(v)
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 4 || len(fields)%2 != 0 {
			continue // a benchmark's own log output, or a name alone on its line
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue
		}
		k, ok := splitName(fields[0])
		if !ok {
			continue
		}
		units := map[string]float64{}
		for i := 2; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: value %q: %w", line, fields[i], err)
			}
			units[fields[i+1]] = v
		}
		res.add(k, units)
	}
	return res, sc.Err()
}

func splitName(name string) (key, bool) {
	name = strings.TrimPrefix(name, "Benchmark")
	cpu := 1
	if m := cpuSuffix.FindStringSubmatch(name); m != nil {
		cpu, _ = strconv.Atoi(m[1])
		name = name[:len(name)-len(m[0])]
	}
	var impl string
	var rest []string
	for _, part := range strings.Split(name, "/") {
		if v, ok := strings.CutPrefix(part, "impl="); ok {
			impl = v
			continue
		}
		rest = append(rest, part)
	}
	if impl == "" {
		return key{}, false
	}
	return key{workload: strings.Join(rest, "/"), cpu: cpu, impl: impl}, true
}

func (r *results) add(k key, units map[string]float64) {
	if !slices.Contains(r.workloads, k.workload) {
		r.workloads = append(r.workloads, k.workload)
	}
	if !slices.Contains(r.impls, k.impl) {
		r.impls = append(r.impls, k.impl)
	}
	if !slices.Contains(r.cpus, k.cpu) {
		r.cpus = append(r.cpus, k.cpu)
		slices.Sort(r.cpus)
	}
	m := r.samples[k]
	if m == nil {
		m = map[string][]float64{}
		r.samples[k] = m
	}
	for u, v := range units {
		m[u] = append(m[u], v)
	}
}

// median returns the median sample of one unit in one cell. The median, as
// benchstat's centre, keeps one noisy sample from moving a ratio.
func (r *results) median(k key, unit string) (float64, bool) {
	xs := slices.Clone(r.samples[k][unit])
	if len(xs) == 0 {
		return 0, false
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2], true
	}
	return (xs[n/2-1] + xs[n/2]) / 2, true
}

// ratio is median(num) / median(den) in one unit.
func (r *results) ratio(num, den key, unit string) (float64, bool) {
	a, ok1 := r.median(num, unit)
	b, ok2 := r.median(den, unit)
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}

// has reports whether any implementation ran workload at cpu.
func (r *results) has(workload string, cpu int) bool {
	for _, impl := range r.impls {
		if _, ok := r.samples[key{workload, cpu, impl}]; ok {
			return true
		}
	}
	return false
}
