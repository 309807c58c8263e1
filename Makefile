# simba's build entry points. `make test` is what CI runs (.ci/run); it sets up what it
# needs on a fresh Debian machine and leaves nothing running.

GO ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export GOTRACEBACK := all

FUZZTIME ?= 20s

.PHONY: test vet unit setup fuzz bench gobench quickstart lint chaos

## test: set up, vet, and run every test with the race detector.
test: setup vet unit

## setup: install what the tests need when it is missing.
setup:
	@scripts/setup.sh

vet:
	$(GO) vet ./...

unit:
	SIMBA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 15m ./...

## chaos: the fault suite's full plan (FAULTS.md), every mutation included; prints the
## table of figures and writes it to chaos-report.md.
chaos: setup
	SIMBA_REQUIRE_SERVERS=1 SIMBA_CHAOS=full SIMBA_CHAOS_REPORT=$(CURDIR)/chaos-report.md \
		$(GO) test -race -count=1 -timeout 90m -run '^TestChaos$$' ./internal/chaos
	@cat chaos-report.md

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

## bench: the side-by-side benchmark program (bench/, a module of its own): simba's
## backends and their peers on the same real servers; writes bench/results/ and the
## README's performance section.
bench: setup
	cd bench && $(GO) run . -results results -readme ../README.md

## gobench: the Go benchmarks of the library's packages.
gobench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

## quickstart: the README's first command.
quickstart:
	$(GO) run ./examples/quickstart

## lint: staticcheck at a pinned version.
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
