# FileProviderKit — developer entry points. `make help` lists them.
# Every target that needs system packages runs `deps` first; it is idempotent and quiet.

SWIFT           ?= swift
PYTHON          ?= python3
# Extra flags for every swift build/test. With another scratch path, point FILEPROVIDERCTL at
# it too: make demo SWIFTPM_FLAGS="--scratch-path /tmp/b" FILEPROVIDERCTL=/tmp/b/release/fileproviderctl
SWIFTPM_FLAGS   ?=
RELEASE_FLAGS   ?= -c release --product fileproviderctl
# The binary demo and bench run (not exported: CLI tests default to the debug build).
FILEPROVIDERCTL ?= $(CURDIR)/.build/release/fileproviderctl

.DEFAULT_GOAL := help
.PHONY: help deps build release test demo bench format clean

help: ## List the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

deps: ## Install missing apt packages (idempotent)
	@scripts/install-deps.sh

build: ## Debug build of every target
	$(SWIFT) build $(SWIFTPM_FLAGS)

release: deps ## Release build of fileproviderctl, fileprovider-guard and media-server (the demo and benchmarks use them)
	$(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_FLAGS)
	$(SWIFT) build $(SWIFTPM_FLAGS) -c release --product fileprovider-guard
	$(SWIFT) build $(SWIFTPM_FLAGS) -c release --product media-server

test: deps ## Build and run all tests, then scripts/test-*.sh in order
	$(SWIFT) build $(SWIFTPM_FLAGS) --build-tests
	@SWIFT="$(SWIFT)" scripts/swift-test.sh $(SWIFTPM_FLAGS)
	@set -e; for t in $$(ls scripts/test-*.sh 2>/dev/null | LC_ALL=C sort); do \
		echo "==> $$t"; bash "$$t"; \
	done

demo: release ## Run scripts/demo.sh against a throwaway home
	FILEPROVIDERCTL="$(FILEPROVIDERCTL)" scripts/demo.sh

bench: release ## Run the benchmarks and update Docs/Performance.md
	FILEPROVIDERCTL="$(FILEPROVIDERCTL)" $(PYTHON) Benchmarks/bench.py $(BENCH_ARGS)

format: ## swift format Sources, Adapters and Tests in place
	$(SWIFT) format -i -r Sources Adapters Tests

clean: ## Remove build products and the demo home (keeps Benchmarks/data)
	rm -rf .build demo-home
