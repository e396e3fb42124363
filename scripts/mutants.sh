#!/usr/bin/env bash
# mutants.sh: apply each planted bug in testdata/mutants to a scratch copy
# of the tree, run the owning package's tests and a short loadgen run
# against it, print which checks killed which mutant, and fail if any
# mutant survives (or no longer applies, or no longer compiles).
#
# Usage: scripts/mutants.sh [testdata/mutants/NAME.patch ...]
# Environment: GO (default go), LOADGEN_DURATION (default 3s),
# TEST_TIMEOUT (go test -timeout, default 5m: a hang kills a mutant too),
# MUTANTS_FROM: what to copy, "worktree" (the default: the files on disk),
# "HEAD" (the last commit), or a directory holding a copy of the tree.
#
# Each patch starts with a free-text header that git apply ignores:
#   Package: the packages whose tests must kill it (go test patterns)
#   Module: the module directory they are in, relative to the root: etcdfleet
#           or cmd (optional; the root module by default)
#   Loadgen: extra loadgen flags, e.g. -mcp (optional)
#
# The working tree itself is never touched: other people may be editing it.
# A scratch copy of it (tracked and untracked, not ignored, files) is taken
# once; the unmutated copy must pass every check first, or the table would
# blame the mutants for the tree's own failures.
set -euo pipefail

GO=${GO:-go}
DURATION=${LOADGEN_DURATION:-3s}
root=$(git rev-parse --show-toplevel)
cd "$root"

patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
	patches=(testdata/mutants/*.patch)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/livereg-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The snapshot. From the working tree: every file git would see, as it is
# on disk now.
mkdir "$work/base"
case ${MUTANTS_FROM:-worktree} in
worktree)
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf - | tar -xf - -C "$work/base"
	;;
HEAD) git archive HEAD | tar -xf - -C "$work/base" ;;
*) (cd "$MUTANTS_FROM" && tar --exclude=./.git -cf - .) | tar -xf - -C "$work/base" ;;
esac

header() { sed -n "s/^$2: *//p" "$1" | head -n 1; }

# pkgs PATCH: the patch's packages as MODULE:PATTERN words.
pkgs() {
	local mod p
	mod=$(header "$1" Module)
	for p in $(header "$1" Package); do printf '%s:%s\n' "${mod:-.}" "$p"; done
}

# check DIR PKGS FLAGS [MODULE...]: runs the checks in DIR and sets
# tests_out and loadgen_out to what caught something ("" when nothing did),
# and tests_all to every top-level test that failed. PKGS holds
# MODULE:PATTERN words; each module's patterns run from its directory.
check() {
	local dir=$1 pkgs=$2 flags=$3 log n mod failed=""
	tests_out="" tests_all="" loadgen_out=""
	log="$work/test.log"
	: >"$log"
	for mod in $(printf '%s\n' $pkgs | cut -d: -f1 | sort -u); do
		# shellcheck disable=SC2086 # pkgs and flags are word lists
		(cd "$dir/$mod" && $GO test -count=1 -timeout "${TEST_TIMEOUT:-5m}" \
			$(printf '%s\n' $pkgs | sed -n "s|^$mod:||p")) >>"$log" 2>&1 || failed=1
	done
	if [ -n "$failed" ]; then
		tests_all=$(sed -nE 's/^--- FAIL: ([^ ]+).*/\1/p' "$log" | sort -u | paste -sd ' ' -)
		n=$(wc -w <<<"$tests_all")
		tests_out="$n failed: $(cut -d ' ' -f 1-2 <<<"$tests_all")"
		[ "$n" -le 2 ] || tests_out="$tests_out ..."
		[ "$n" -gt 0 ] || tests_out="FAIL ($(grep -m1 -E 'panic:|FAIL|timed out' "$log" | cut -c1-60))"
	fi
	log="$work/loadgen.log"
	(cd "$dir/cmd" && $GO build -o "$work/loadgen" ./loadgen) >"$log" 2>&1 || { loadgen_out="build failed"; return; }
	# shellcheck disable=SC2086
	if ! (cd "$dir" && "$work/loadgen" -duration "$DURATION" $flags) >"$log" 2>&1; then
		loadgen_out=$(awk '$1 ~ /^[0-9]+$/ && NF == 4 && $4 > 0 { printf "%s%s(%s)", sep, $2, $4; sep=" " }' "$log")
		[ -n "$loadgen_out" ] || loadgen_out="exit: $(grep -m1 -E 'error|panic|FAIL' "$log" | cut -c1-60)"
	fi
}

all_pkgs=""
for p in "${patches[@]}"; do all_pkgs="$all_pkgs $(pkgs "$p")"; done
# shellcheck disable=SC2086 # one package a word
all_pkgs=$(printf '%s\n' $all_pkgs | sort -u | paste -sd ' ' -)
echo "baseline: unmutated copy of ${MUTANTS_FROM:-worktree}, packages $all_pkgs, loadgen -mcp -duration $DURATION"
check "$work/base" "$all_pkgs" -mcp
if [ -n "$tests_out$loadgen_out" ]; then
	echo "the unmutated tree fails its own checks: tests: ${tests_out:-pass}; loadgen: ${loadgen_out:-pass}" >&2
	exit 1
fi

start=$SECONDS
survivors=0
rows=() details=()
for p in "${patches[@]}"; do
	name=$(basename "$p" .patch)
	pkgs=$(pkgs "$p" | paste -sd ' ' -)
	flags=$(header "$p" Loadgen)
	mod=$(header "$p" Module)
	dir="$work/m"
	rm -rf "$dir"
	cp -a "$work/base" "$dir"
	if ! (cd "$dir" && git apply "$root/$p") 2>/dev/null; then
		rows+=("$name|${pkgs//.:/}|does not apply|-|STALE")
		survivors=$((survivors + 1))
		continue
	fi
	if ! (cd "$dir/${mod:-.}" && $GO build ./...) >"$work/build.log" 2>&1; then
		rows+=("$name|${pkgs//.:/}|does not compile|-|BROKEN")
		survivors=$((survivors + 1))
		continue
	fi
	t0=$SECONDS
	check "$dir" "$pkgs" "$flags"
	verdict=killed
	if [ -z "$tests_out$loadgen_out" ]; then
		verdict=SURVIVED
		survivors=$((survivors + 1))
	fi
	rows+=("$name|${pkgs//.:/}|${tests_out:--}|${loadgen_out:--} [${flags:-default}]|$verdict ($((SECONDS - t0))s)")
	[ -z "$tests_all" ] || details+=("$name: $tests_all")
done

echo
{
	echo "mutant|packages|package tests that failed|loadgen invariants violated|verdict"
	printf '%s\n' "${rows[@]}"
} | column -t -s '|'
echo
[ ${#details[@]} -eq 0 ] || { echo "every failing test:"; printf '  %s\n' "${details[@]}"; echo; }
echo "${#patches[@]} mutants, $survivors surviving, $((SECONDS - start))s after the baseline"
[ "$survivors" -eq 0 ]
