#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm package @modelcontextprotocol/conformance) against
# cmd/livereg-mcp started with -conformance on a free loopback port, then stops the server.
#   usage: scripts/conformance.sh [--all | SCENARIO ...]
# MCP_CONFORMANCE_VERSION picks the suite's version (default 0.2.0-alpha.12, which make conformance runs).
# With no scenario named, or --all, it runs every server scenario that version lists (65 in
# 0.2.0-alpha.12: MCP 2026-07-28, 2025-11-25 and the tasks extension); version 0.1.16 runs its 32.
# LIVEREG_MCP_FLAGS adds flags to the server's command line (for example -stateless).
# LIVEREG_MCP_FLEET=1 runs it as a replica that has joined a fleet, over an etcd it embeds.
# LIVEREG_MCP_FLEET=forwarder runs two replicas: a holder that serves every fixture (and embeds the
# etcd), and a front that joins it and serves none; the suite runs against the front, so that every
# fixture is listed and reached across the fleet hop.
# Needs Go and Node (>= 20) with npm. The package is installed once into $MCP_CONFORMANCE_HOME
# (default ~/.cache/mcp-conformance) from the npm registry, exactly as ../shared/tools/mcp-conformance
# does: version 0.1.16 declares Node >= 22 but runs its server scenarios on Node 20; the one import
# Node 20 lacks (fs.globSync, used only by its tier-check command) is replaced by a stub.
# Exit status: 0 when every scenario passed, 1 otherwise, 2 when the setup failed.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${MCP_CONFORMANCE_VERSION:-0.2.0-alpha.12}
home=${MCP_CONFORMANCE_HOME:-$HOME/.cache/mcp-conformance}
[ "$version" = 0.1.16 ] || home=$home/$version
dist=$home/node_modules/@modelcontextprotocol/conformance/dist/index.js

for tool in go node npm; do
  command -v "$tool" >/dev/null || { echo "conformance: $tool is required" >&2; exit 2; }
done
if [ ! -f "$dist" ]; then
  echo "conformance: installing @modelcontextprotocol/conformance@$version into $home" >&2
  mkdir -p "$home"
  (cd "$home" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund "@modelcontextprotocol/conformance@$version" >/dev/null 2>&1) ||
    { echo "conformance: npm install failed" >&2; exit 2; }
fi
if grep -q 'globSync as' "$dist"; then
  perl -0pi -e 's/import\{([^{}]*?)globSync as (\w+),([^{}]*?)\}from"fs";/import{$1$3}from"fs";const $2=()=>{throw new Error("globSync needs Node 22")};/' "$dist"
fi

scenarios=("$@")
if [ "${scenarios[0]:-}" = --all ] || { [ ${#scenarios[@]} -eq 0 ] && [ "$version" != 0.1.16 ]; }; then
  mapfile -t scenarios < <(cd "$home" && node "$dist" list 2>/dev/null |
    sed -n '/^Server scenarios/,/^Client scenarios/p' | sed -n 's/^  - \([^ ]*\).*/\1/p')
  [ ${#scenarios[@]} -gt 0 ] || { echo "conformance: the suite listed no server scenarios" >&2; exit 2; }
elif [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(server-initialize ping tools-list tools-call-simple-text tools-call-image tools-call-audio
    tools-call-embedded-resource tools-call-mixed-content tools-call-error resources-list
    resources-read-text resources-read-binary dns-rebinding-protection
    tools-call-with-logging tools-call-with-progress tools-call-sampling tools-call-elicitation
    elicitation-sep1034-defaults elicitation-sep1330-enums json-schema-2020-12
    logging-set-level server-sse-polling server-sse-multiple-streams resources-templates-read
    resources-subscribe resources-unsubscribe prompts-list prompts-get-simple prompts-get-with-args
    prompts-get-embedded-resource prompts-get-with-image completion-complete)
fi

work=$(mktemp -d)
pid=
holder=
cleanup() {
  for p in $pid $holder; do
    if kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

# await FILE PID LOG: waits up to 30 s for the server PID to write its URL into FILE.
await() {
  for _ in $(seq 1 300); do
    [ -s "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || { echo "conformance: the server exited:" >&2; cat "$3" >&2; exit 2; }
    sleep 0.1
  done
  echo "conformance: the server did not start in 30s" >&2; cat "$3" >&2; exit 2
}

(cd cmd && go build -o "$work/livereg-mcp" ./livereg-mcp)
# A fleet of one: the etcd's data in the work directory, its client port picked by the kernel.
fleet=()
fixtures=(-conformance)
if [ -n "${LIVEREG_MCP_FLEET:-}" ]; then
  fleet=(-etcd-embedded "$work/etcd" -etcd-listen http://127.0.0.1:0 -replica conformance)
  LIVEREG_FLEET_TOKEN=${LIVEREG_FLEET_TOKEN:-$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')}
  export LIVEREG_FLEET_TOKEN
fi
if [ "${LIVEREG_MCP_FLEET:-}" = forwarder ]; then
  # The holder: every fixture, and the fleet's etcd, whose URL it logs.
  "$work/livereg-mcp" -conformance "${fleet[@]}" -addr 127.0.0.1:0 -url-file "$work/holder-url" 2>"$work/holder.log" &
  holder=$!
  await "$work/holder-url" "$holder" "$work/holder.log"
  etcd=$(grep -o 'client_url=[^ ]*' "$work/holder.log" | head -n 1 | cut -d= -f2)
  [ -n "$etcd" ] || { echo "conformance: the holder logged no etcd URL" >&2; cat "$work/holder.log" >&2; exit 2; }
  fleet=(-etcd "$etcd" -replica front)
  fixtures=()
fi
# Port 0: the kernel picks a free port; the server writes its URL once it listens.
# shellcheck disable=SC2086 # LIVEREG_MCP_FLAGS is split into flags on purpose
"$work/livereg-mcp" ${fixtures[@]+"${fixtures[@]}"} ${fleet[@]+"${fleet[@]}"} ${LIVEREG_MCP_FLAGS:-} -addr 127.0.0.1:0 -url-file "$work/url" 2>"$work/server.log" &
pid=$!
await "$work/url" "$pid" "$work/server.log"
url=$(cat "$work/url")
echo "conformance: livereg-mcp ${fixtures[@]+${fixtures[*]} }${fleet[@]+${fleet[*]} }${LIVEREG_MCP_FLAGS:+$LIVEREG_MCP_FLAGS }at $url${holder:+ (every fixture on a holder replica at $(cat "$work/holder-url"))}"

failed=0
for s in "${scenarios[@]}"; do
  if out=$(cd "$home" && timeout 120 node "$dist" server --url "$url" --scenario "$s" 2>&1); then
    echo "PASS $s"
  else
    echo "FAIL $s"
    printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
    failed=$((failed + 1))
  fi
done
echo "$(( ${#scenarios[@]} - failed )) passed, $failed failed"

for p in $pid $holder; do
  kill -TERM "$p"
  if ! wait "$p"; then
    echo "conformance: a server did not shut down cleanly:" >&2
    tail -n 20 "$work/server.log" >&2
    failed=$((failed + 1))
  fi
done
pid= holder=
[ "$failed" -eq 0 ]
