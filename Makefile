# livereg's front door. Every target runs on a fresh machine with only Go
# installed: the tools it needs come through the Go module proxy.

GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
FUZZTIME    ?= 15s
BENCHSTAT   := $(GOBIN)/benchstat
BENCHCOUNT  ?= 6
BENCHTIME   ?= 200ms
BENCHCPU    ?= 1,2
RESULTS     := bench/results

.PHONY: test race vet lint fuzz tools bench bench-quick bench-wire

## test: vet, then the whole suite with and without the race detector.
## Both, because -race turns off the tiny allocator and so hides garbage
## collection bugs that matter to owner/. etcdfleet/ and cmd/ are modules
## of their own (they keep etcd and Prometheus out of the core's
## dependencies), so they run from there.
test: vet
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./...
	cd etcdfleet && $(GO) vet ./... && $(GO) test -count=1 ./... && $(GO) test -race -count=1 ./...
	cd cmd && $(GO) vet ./... && $(GO) test -count=1 ./... && $(GO) test -race -count=1 ./...

## race: the suite under the race detector only.
race:
	$(GO) test -race -count=1 ./...
	cd etcdfleet && $(GO) test -race -count=1 ./...
	cd cmd && $(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

## lint: go vet and staticcheck (installed at a pinned version).
lint: vet $(STATICCHECK)
	$(STATICCHECK) ./...
	cd etcdfleet && $(STATICCHECK) ./...
	cd cmd && $(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## fuzz: every fuzz target for FUZZTIME each (go test runs only their seed
## corpora). Crashers land in the package's testdata/fuzz, as regressions.
## It fails on a failing input or any other failure, except the spurious
## "context deadline exceeded" of Go 1.26's fuzzing coordinator at the end
## of a run that found nothing: see scripts/fuzz.sh.
FUZZTARGETS := shardreg:FuzzOperations shardreg:FuzzPageCursor bindsec:FuzzStaticTokens internal/strictjson:FuzzCheck mcpserve:FuzzHTTPRequest mcpserve:FuzzFastPath mcpserve:FuzzFastPathSession
fuzz:
	GO=$(GO) scripts/fuzz.sh $(FUZZTIME) $(FUZZTARGETS)

## bench: livereg beside its baselines (bench/), $(BENCHCOUNT) samples of
## each case at -cpu $(BENCHCPU), enough for benchstat's confidence
## intervals. Writes $(RESULTS)/latest.txt (raw), benchstat.txt (the
## implementations side by side), table.md (ratios and the performance goals) and
## chart.svg, the last two by cmd/benchreport (built into bin/). Memory per
## entry does not depend on GOMAXPROCS, so it runs once, at -cpu 1. About 14 minutes on 2 quiet cores; -large=false in BENCHFLAGS
## drops the 1,000,000-entry cases.
bench: $(BENCHSTAT)
	mkdir -p $(RESULTS)
	$(GO) test -run '^$$' -bench . -skip Memory -count $(BENCHCOUNT) -benchtime $(BENCHTIME) -cpu $(BENCHCPU) -timeout 60m ./bench $(BENCHFLAGS) 2>&1 | tee $(RESULTS)/latest.txt
	$(GO) test -run '^$$' -bench Memory -count 3 -cpu 1 -timeout 30m ./bench $(BENCHFLAGS) 2>&1 | tee -a $(RESULTS)/latest.txt
	! grep -Eq '^(FAIL|--- FAIL|panic:)' $(RESULTS)/latest.txt
	$(BENCHSTAT) -col /impl $(RESULTS)/latest.txt > $(RESULTS)/benchstat.txt
	cd cmd && $(GO) build -o ../bin/benchreport ./benchreport
	bin/benchreport -in $(RESULTS)/latest.txt -md $(RESULTS)/table.md -svg $(RESULTS)/chart.svg \
		-cmd 'make bench BENCHCOUNT=$(BENCHCOUNT) BENCHTIME=$(BENCHTIME) BENCHCPU=$(BENCHCPU)'

## bench-quick: about a minute; one sample of the cases behind the performance
## goals, into $(RESULTS)/quick.txt, and the goals table on standard output.
## A smoke test, not evidence: one sample gives no confidence interval.
bench-quick:
	mkdir -p $(RESULTS)
	$(GO) test -run '^$$' -bench 'ResolveHit/n=(128|10000)$$|RegisterFullCap/|Mixed/mix=90-5-5|PlanFor/|Dispatch/plan=public|SlowBody|SDKCall|Consumers' -skip RegisterFullCapDead \
		-short -count 1 -benchtime 300ms -cpu $(BENCHCPU) ./bench 2>&1 | tee $(RESULTS)/quick.txt
	! grep -Eq '^(FAIL|--- FAIL|panic:)' $(RESULTS)/quick.txt
	cd cmd && $(GO) build -o ../bin/benchreport ./benchreport
	bin/benchreport -in $(RESULTS)/quick.txt -cmd 'make bench-quick'

## bench-wire: cmd/wirebench: each server in a process of its own on
## loopback, pinned to core 0 with the load on core 1 where there are two
## cores: livereg (mcpserve), a bare go-sdk v1.8.0 server, a bare mcp-go
## v1.2.1 server and a plain net/http floor, stateful and stateless, a
## fresh server per run, WIREROUNDS rounds interleaved: tools/call of one
## echo tool from 1, 16 and 128 clients (WireCall) and tools/list of
## 1,000 tools, every page (WireList). livereg-forward is two replicas in
## one process, the called one forwarding every call to the other: what
## the fleet hop adds. Reports calls/s (as ns/op), p50,
## p99, the server's CPU, allocations and bytes per call from its own
## counters, and its peak RSS. Writes $(RESULTS)/wire.txt, the servers
## side by side in wire-benchstat.txt, and the wire's goals judged in
## wire-table.md (cmd/benchreport). About 8 minutes.
WIREROUNDS ?= 5
bench-wire: $(BENCHSTAT)
	mkdir -p $(RESULTS) bin
	cd cmd && $(GO) build -o ../bin/wirebench ./wirebench
	bin/wirebench -rounds $(WIREROUNDS) | tee $(RESULTS)/wire.txt
	! grep -Eq '^(FAIL|--- FAIL|panic:)' $(RESULTS)/wire.txt
	$(BENCHSTAT) -col /impl $(RESULTS)/wire.txt | tee $(RESULTS)/wire-benchstat.txt
	cd cmd && $(GO) build -o ../bin/benchreport ./benchreport
	bin/benchreport -in $(RESULTS)/wire.txt -md $(RESULTS)/wire-table.md \
		-cmd 'make bench-wire WIREROUNDS=$(WIREROUNDS)'

$(BENCHSTAT):
	$(GO) install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: serve conformance conformance-fleet conformance-forwarder

## serve: builds bin/livereg-mcp and runs it with its demo consumers,
## streamable HTTP at http://127.0.0.1:8931/mcp, until Ctrl-C. Flags go in
## SERVEFLAGS, e.g. make serve SERVEFLAGS='-conformance -log-level debug';
## bearer tokens in LIVEREG_MCP_TOKENS (TOKEN@SUBJECT[:ROLE[+ROLE...]],...).
## A built binary rather than go run: the server is make's own child, so
## Ctrl-C reaches it, its graceful shutdown exits 0, and no process is left
## listening.
serve:
	cd cmd && $(GO) build -o ../bin/livereg-mcp ./livereg-mcp
	exec bin/livereg-mcp $(SERVEFLAGS)

## conformance: the official MCP conformance suite, version 0.2.0-alpha.12
## (MCP 2026-07-28, 2025-11-25 and the tasks extension), every server
## scenario, against livereg-mcp -conformance, the default endpoint,
## on a free loopback port (scripts/conformance.sh). Needs Node and npm
## besides Go: the suite is an npm package, installed once into
## ~/.cache/mcp-conformance. About three minutes.
conformance:
	scripts/conformance.sh

## conformance-fleet: the same suite against livereg-mcp as a replica that
## has joined a fleet, over an etcd it embeds (LIVEREG_MCP_FLEET=1). About
## three minutes.
conformance-fleet:
	LIVEREG_MCP_FLEET=1 scripts/conformance.sh

## conformance-forwarder: the same suite through a replica that serves no
## fixture: another replica of its fleet holds them all, and every scenario
## crosses the fleet hop (LIVEREG_MCP_FLEET=forwarder). About three minutes.
conformance-forwarder:
	LIVEREG_MCP_FLEET=forwarder scripts/conformance.sh

.PHONY: loadgen loadgen-smoke loadgen-fleet-smoke

## loadgen: the stress CLI cmd/loadgen, the default 10 s run: parallel
## calls, listings, starts and stops while consumers die in all four ways
## ADR-0068 names, its sixteen invariants checked throughout. Prints the
## report and exits 0 only with no violation (1: violations, listed; 2: bad
## flags; 3: interrupted with none so far, reported INCOMPLETE). Flags go in LOADGENFLAGS, e.g.
## make loadgen LOADGENFLAGS='-duration 1m -mcp -json loadgen.json'.
loadgen:
	cd cmd && $(GO) build -o ../bin/loadgen ./loadgen
	bin/loadgen $(LOADGENFLAGS)

## loadgen-smoke: a 3 s loadgen run for CI, its JSON report in
## bin/loadgen-smoke.json. The checkers' own tests run in make test.
loadgen-smoke:
	cd cmd && $(GO) build -o ../bin/loadgen ./loadgen
	bin/loadgen -duration 3s -json bin/loadgen-smoke.json $(LOADGENFLAGS)

## loadgen-fleet-smoke: a 5 s loadgen -fleet 3 run for CI (three replicas
## over an embedded etcd, with a revoked lease, a crash and a cut from etcd),
## its JSON report in bin/loadgen-fleet-smoke.json. About 9 s. The full run:
## make loadgen LOADGENFLAGS='-fleet 3 -duration 30s'.
loadgen-fleet-smoke:
	cd cmd && $(GO) build -o ../bin/loadgen ./loadgen
	bin/loadgen -fleet 3 -duration 5s -json bin/loadgen-fleet-smoke.json $(LOADGENFLAGS)

.PHONY: mutants

## mutants: every planted bug in testdata/mutants (one per core guarantee
## of owner, shardreg, bindsec, catalog, mcpserve and loadgen's checkers),
## each applied to a scratch copy of the tree, never to the tree itself;
## the owning package's tests and a LOADGEN_DURATION loadgen run (3 s by
## default; -mcp where the patch asks) against each. Prints which checks
## killed which mutant, and fails if any survives. Not part of .ci/run: it
## takes several minutes (see the README's "Correctness evidence").
mutants:
	GO=$(GO) scripts/mutants.sh
