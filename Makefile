# livereg's front door. Every target runs on a fresh machine with only Go
# installed: the tools it needs come through the Go module proxy.

GO          ?= go
GOBIN       := $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck
FUZZTIME    ?= 15s

.PHONY: test race vet lint fuzz tools

## test: vet, then the whole suite with and without the race detector.
## Both, because -race turns off the tiny allocator and so hides garbage
## collection bugs that matter to owner/.
test: vet
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./...

## race: the suite under the race detector only.
race:
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

## lint: go vet and staticcheck (installed at a pinned version).
lint: vet $(STATICCHECK)
	$(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
