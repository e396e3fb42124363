#!/usr/bin/env bash
# Runs the write-path and lookup benchmarks at -cpu 1,2,4,8,16 (or CPUS) and
# prints how each workload's time per op scales against its -cpu 1 time: on
# a machine with many cores, the curve behind the scaling goals, which a
# 2-core machine cannot show.
#   usage: scripts/scaling.sh [OUTDIR]
#   env:   CPUS (1,2,4,8,16)  COUNT (6)  BENCHTIME (200ms)  GO (go)
# Writes OUTDIR/scaling.txt (raw benchmark output, both packages),
# OUTDIR/table.md (cmd/benchreport: every ratio and goal, per -cpu) and
# OUTDIR/curve.txt (median ns/op per -cpu, and its ratio to -cpu 1).
# OUTDIR defaults to bench/results/scaling. Read the ratios within one run.
# Exit status: 0 when every run completed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

go=${GO:-go}
cpus=${CPUS:-1,2,4,8,16}
count=${COUNT:-6}
benchtime=${BENCHTIME:-200ms}
out=${1:-bench/results/scaling}
mkdir -p "$out"
raw=$out/scaling.txt

echo "# $(date -u +%FT%TZ) $(nproc) CPUs; -cpu $cpus, -count $count, -benchtime $benchtime" | tee "$raw"

# The bench suite: livereg beside its baselines. Mixed is the 99/1 and
# 90/5/5 resolve/write mixes; RestartStorm and RegisterFullCapDead are the
# write-heavy cases; RegisterFullCap(UnrelatedDeaths) checks that deaths
# elsewhere still cost a full register nothing at every width.
"$go" test -run '^$' -short -count "$count" -benchtime "$benchtime" -cpu "$cpus" -timeout 60m \
	-bench 'ResolveHit/n=10000/|Mixed/|RestartStorm/|RegisterFullCap/|RegisterFullCapUnrelatedDeaths/|RegisterFullCapDead/|WritersVsListers/' \
	./bench 2>&1 | tee -a "$raw"

# The registry's own: register/unregister churn on per-goroutine names,
# and resolve hits, with no baseline beside them.
"$go" test -run '^$' -count "$count" -benchtime "$benchtime" -cpu "$cpus" -timeout 30m \
	-bench '^Benchmark(Churn|Resolve)$' ./shardreg 2>&1 | tee -a "$raw"

(cd cmd && "$go" build -o ../bin/benchreport ./benchreport)
bin/benchreport -in "$raw" -md "$out/table.md" -cmd "scripts/scaling.sh (CPUS=$cpus COUNT=$count BENCHTIME=$benchtime)"

# Median ns/op per benchmark and -cpu, and the ratio to -cpu 1: below 1
# means more cores made each op cheaper.
awk '
/^Benchmark/ && $4 == "ns/op" {
	name = $1; cpu = 1
	if (match(name, /-[0-9]+$/)) { cpu = substr(name, RSTART + 1) + 0; name = substr(name, 1, RSTART - 1) }
	key = name SUBSEP cpu
	n[key]++; v[key, n[key]] = $3 + 0
	if (!(name in seen)) { seen[name] = 1; order[++names] = name }
	if (!(cpu in cpuseen)) { cpuseen[cpu] = 1; cpulist[++ncpu] = cpu }
}
function median(key,   i, j, t, m, a) {
	m = n[key]
	for (i = 1; i <= m; i++) a[i] = v[key, i]
	for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return m % 2 ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2
}
END {
	for (i = 1; i <= names; i++) {
		name = order[i]; base = 0
		printf "%s\n", name
		for (c = 1; c <= ncpu; c++) {
			key = name SUBSEP cpulist[c]
			if (!(key in n)) continue
			m = median(key)
			if (cpulist[c] == 1) base = m
			if (base > 0) printf "  -cpu %-3d %12.1f ns/op  %5.2fx -cpu 1\n", cpulist[c], m, m / base
			else printf "  -cpu %-3d %12.1f ns/op\n", cpulist[c], m
		}
	}
}' "$raw" | tee "$out/curve.txt"
