# simba's build entry points. `make test` is what CI runs (.ci/run); it sets up what it
# needs on a fresh Debian machine and leaves nothing running.

GO ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
export GOTRACEBACK := all

FUZZTIME ?= 20s

.PHONY: test vet unit setup fuzz bench gobench quickstart lint chaos sim

## test: set up, vet, and run every test with the race detector (vet runs beside the
## fault suite, off the suite's critical path; see unit).
test: setup unit

## setup: install what the tests need when it is missing.
setup:
	@scripts/setup.sh

# MODULES are the modules of their own inside the repository, which the root module's
# `./...` does not reach (bench/ aside: `make bench` runs it).
MODULES := observe/simbaprom observe/simbaotel cmd/simba simbagocron backend/etcd

vet:
	$(GO) vet ./...
	@for m in $(MODULES); do echo "(cd $$m && $(GO) vet ./...)"; (cd $$m && $(GO) vet ./...) || exit 1; done

## unit: the root module's tests and, alongside them, vet and the tests of MODULES; the
## root runs three packages at once (-p 3) rather than one per core. Much of the time is
## spent waiting on timers and servers, but not most: on 2 cores the run uses about 1.5 of
## them on average, and some task waits for a CPU in two thirds of its seconds (median
## /proc/pressure/cpu "some" 67%). Tests that bound store calls therefore give a store
## time to match what it costs there (tck.WithTimeScale, a chaos kit's Scale). The
## modules' output follows the root's. The fault suite (internal/chaos), the longest
## package by far, is named first so that it starts first and the others run beside it,
## instead of it starting once the backends' packages are done.
unit:
	@log=$$(mktemp); \
	( $(MAKE) -s vet && for m in $(MODULES); do (cd $$m && SIMBA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -timeout 10m ./...) || exit 1; done ) >$$log 2>&1 & \
	modules=$$!; \
	SIMBA_REQUIRE_SERVERS=1 $(GO) test -race -count=1 -p 3 -timeout 15m ./internal/chaos ./...; root=$$?; \
	wait $$modules; status=$$?; cat $$log; rm -f $$log; \
	[ $$root -eq 0 ] && [ $$status -eq 0 ]

## chaos: the fault suite's full plan, every mutation included; prints the
## table of figures and writes it to chaos-report.md. The etcd scenarios and mutations run
## in the etcd module's tests (all of them here, four scenarios in make
## test), their verdicts in its output.
chaos: setup
	SIMBA_REQUIRE_SERVERS=1 SIMBA_CHAOS=full SIMBA_CHAOS_REPORT=$(CURDIR)/chaos-report.md \
		$(GO) test -race -count=1 -timeout 90m -run '^TestChaos$$' ./internal/chaos
	cd backend/etcd && SIMBA_REQUIRE_SERVERS=1 SIMBA_CHAOS=full $(GO) test -race -count=1 -timeout 30m -run '^TestChaos$$' -v .
	@cat chaos-report.md

SEEDS ?= 2000
FIRST ?= 1

## sim: the deterministic simulation of the core over SEEDS seeds from FIRST (make test
## runs 400); a failure prints its seed, the shortest failing history and how to replay it.
sim:
	$(GO) test -race -count=1 -timeout 0 -run 'TestSimulation$$' -v . -args -sim.seeds=$(SEEDS) -sim.first=$(FIRST)

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

## bench: the side-by-side benchmark program (bench/, a module of its own): simba's
## backends and their peers on the same real servers; writes bench/results/ and the
## README's performance section. BENCHFLAGS go to the program: `make bench
## BENCHFLAGS=-quick` is a smoke run of a few minutes that leaves the README alone
## (`cd bench && go run . -h` lists the rest).
BENCHFLAGS ?=
bench: setup
	cd bench && $(GO) run . -results results -readme ../README.md $(BENCHFLAGS)

## gobench: the Go benchmarks of the library's packages.
gobench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

## quickstart: the README's first command.
quickstart:
	$(GO) run ./examples/quickstart

## lint: staticcheck at a pinned version.
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@for m in $(MODULES); do (cd $$m && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) || exit 1; done
