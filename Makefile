# batchlake — make demo, make test, make bench.
GO      ?= go
TAGS    := duckdb_arrow
BIN     := bin/batchlake
DEMO    := demo

.PHONY: all build demo test test-short test-race test-timing lint tidy-check fuzz bench bench-scale bench-lake bench-go reliability clean

all: build

build: ## the batchlake binary (DuckDB's Arrow interface compiled in)
	$(GO) build -tags $(TAGS) -o $(BIN) ./cmd/batchlake

demo: build ## the whole loop on the built-in simulator: plan, submit, collect, reconcile, retry; the last small retry runs synchronously
	rm -rf $(DEMO)
	$(BIN) run --lake $(DEMO)/lake --provider sim --input testdata/demo/requests.jsonl \
		--tenant demo --prompt-version v1 --shard-max-records 100 --poll 50ms --out $(DEMO)/out --sync-below 20
	@echo
	@echo "Reports and retry files are in $(DEMO)/out/. Now ask the lake, for example:"
	@echo "  $(BIN) sql --lake $(DEMO)/lake \"SELECT final_state, count(*) AS records, sum(cost_usd) AS cost_usd FROM records GROUP BY ALL\""
	@echo "  $(BIN) sql --lake $(DEMO)/lake \"SELECT category, sum(cost_usd) AS usd FROM costs GROUP BY ALL ORDER BY usd DESC\""
	@echo "  $(BIN) sql --lake $(DEMO)/lake \"SELECT attempt, mode, count(*) AS lines, sum(cost_usd) AS usd FROM costs GROUP BY ALL ORDER BY attempt\""

# ---- tests ------------------------------------------------------------------
# make test is what CI runs: lint, every test (each fuzz target runs its seed
# corpus as a plain test there), and the race detector over the concurrent
# packages. make tidy-check is apart: go mod tidy -diff downloads every
# platform's DuckDB library (some 230 MB) on a fresh machine. make test-short is the quick loop while
# editing: it skips the suites that run batchlake as a subprocess per step and
# the long hostile inputs (each skip says why). Instrumented fuzzing is make fuzz.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
RACE_PKGS   := ./lifecycle/... ./lake/... ./ingest/...

# The tests' temporary lakes (and go test's own work folder) go under
# TEST_TMPDIR, a RAM-backed folder when the machine has one: a local lake
# fsyncs its commit markers and ledger events, and on a slow disk those waits,
# not the cpu, were most of the tests' wall time. The folder is removed after
# each go test. TEST_TMPDIR=/tmp (or any folder) puts them on disk.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp})
# The packages whose tests take longest come first: go test links and runs
# packages in the order given, and the longest ones started last would run
# alone at the end on one core.
TEST_PKGS := ./reconcile/ ./cmd/batchlake/ ./lake/ ./lifecycle/ ./...
# Test binaries that include DuckDB link in about three quarters of the time
# with gold than with the default GNU ld, when the machine has it, and in
# three quarters of that again without DWARF (-w: the linker then neither
# writes nor compresses it; stack traces keep their files and lines). A
# debugger needs it back: make test TEST_LDFLAGS=.
TEST_LDFLAGS ?= -ldflags="-w$(shell command -v ld.gold >/dev/null 2>&1 && echo ' -extldflags=-fuse-ld=gold')"
GOTEST = tmp=$$(mktemp -d "$(TEST_TMPDIR)/batchlake-test.XXXXXX") && trap "rm -rf $$tmp" EXIT && TMPDIR=$$tmp $(GO) test -tags $(TAGS) $(TEST_LDFLAGS)

test: lint ## lint, every test, -race over the concurrent packages
	$(GOTEST) -timeout 15m $(TEST_PKGS)
	$(GOTEST) -short -race -timeout 10m $(RACE_PKGS)

test-short: ## the quick loop: in-process tests of every package, no subprocess suites
	$(GOTEST) -short -timeout 5m $(TEST_PKGS)

test-race: ## the race detector over the concurrent packages (lake, ingest, lifecycle)
	$(GOTEST) -short -race -timeout 10m $(RACE_PKGS)

test-timing: ## wall and cpu time of the -short run and of the full run, and how busy the machine was meanwhile (warm the build cache first; test results are not reused)
	@echo "TMPDIR under $(TEST_TMPDIR)"
	@sh bench/timed.sh "go test -short ./..." sh -c '$(GOTEST) -short -count=1 -timeout 5m $(TEST_PKGS)'
	@sh bench/timed.sh "go test ./..." sh -c '$(GOTEST) -count=1 -timeout 15m $(TEST_PKGS)'

lint: ## gofmt, go vet and staticcheck (fetched through the module proxy at a pinned version)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt -l (run gofmt -w on these):"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(TAGS) ./...
	$(GO) run $(STATICCHECK) -tags $(TAGS) ./...

tidy-check: ## go mod tidy would change nothing in go.mod and go.sum
	$(GO) mod tidy -diff

# The fuzz run is bounded by a count or a duration; with a duration, Go 1.26's
# fuzz coordinator can report a spurious "context deadline exceeded" when it
# ends (go.dev/issue/75804, fixed in Go 1.27). Use FUZZTIME=Nx if that shows.
FUZZTIME ?= 60s
fuzz: ## every fuzz target, instrumented, for FUZZTIME (default 60s each; Nx for N inputs)
	@set -e; for pkg in $$($(GO) list -tags $(TAGS) ./...); do \
		dir=$$($(GO) list -tags $(TAGS) -f '{{.Dir}}' $$pkg); \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
			echo "fuzz $$pkg $$t"; \
			$(GO) test -tags $(TAGS) -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# ---- bench (bench/README.md) --------------------------------------------------------
# make bench [N=1000000] [RUNS=3] [SEED=1] [DATA=./bench-data] — plan, ingest and
# reconcile beside the DuckDB baseline, the contract floor and a single-threaded
# Python reconciler; variables given on the make command line reach bench/run.sh
# through the environment.
bench: ## measure plan, ingest, reconcile, the DuckDB baseline, contract floor and Python reconciler at N records (default 1M)
	bash bench/run.sh

# make bench-scale [SMALL=1000000] [BIG=10000000] [RUNS=3] [BIG_RUNS=1] — plan,
# ingest and reconcile at both sizes in one session, the ratio of their times
# (bench/scale.sh).
bench-scale: ## time plan, ingest and reconcile at 1M and 10M records in one session, and the ratio
	bash bench/scale.sh

# make bench-lake [JOBS=10000] [RUNS=3] [LAKE=./bench-lake] — lake-wide sql, and one
# job's report, over a lake of many small jobs, read live and through a compaction
# (bench/lake.sh).
bench-lake: ## time lake-wide sql and one job's report at 1, 100, 1,000 and 10,000 small jobs, live and compacted
	JOBS=$(or $(JOBS),10000) bash bench/lake.sh

bench-go: ## Go benchmarks of the hot paths
	$(GO) test -tags $(TAGS) -run '^$$' -bench . -benchmem ./bench/gen/ ./ingest/ ./lake/ ./lake/sha256x2/ ./reconcile/

reliability: ## the long race, crash and hostile-input suites, and docs/reliability.md
	rm -f reliability.jsonl
	BATCHLAKE_LONG=1 BATCHLAKE_RELIABILITY_OUT=$(CURDIR)/reliability.jsonl $(GO) test -tags $(TAGS) -timeout 30m ./lake/ ./lifecycle/ ./providers/... ./cmd/...
	$(GO) run ./cmd/blreliability -in reliability.jsonl -out docs/reliability.md

# ---- image (docs/deploy.md) --------------------------------------------------------
IMAGE ?= batchlake:latest
.PHONY: image
image: ## the container image (Dockerfile): make image [IMAGE=registry/batchlake:tag]
	docker build -t $(IMAGE) .

clean:
	rm -rf bin $(DEMO)
