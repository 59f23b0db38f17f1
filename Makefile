# FileProviderKit — developer entry points. `make help` lists them.
# Every target that needs system packages runs `deps` first; it is idempotent and quiet.

SWIFT           ?= swift
PYTHON          ?= python3
# Extra flags for every swift build/test. With another scratch path, point FILEPROVIDERCTL at
# it too: make demo SWIFTPM_FLAGS="--scratch-path /tmp/b" FILEPROVIDERCTL=/tmp/b/release/fileproviderctl
SWIFTPM_FLAGS   ?=
# The one release build: the Swift runtime and Foundation linked in (-static-stdlib), so the
# binaries run without the toolchain. release, install, demo, bench and the release tests all
# share it (other flags would build everything again). Passed with -Xswiftc, not
# --static-swift-stdlib, because `swift package` (the man page plugin) takes only the former.
RELEASE_BUILD   ?= -c release -Xswiftc -static-stdlib
RELEASE_FLAGS   ?= $(RELEASE_BUILD) --product fileproviderctl
# The binary demo and bench run (not exported: CLI tests default to the debug build).
FILEPROVIDERCTL ?= $(CURDIR)/.build/release/fileproviderctl
# media-server is a package of its own (so the kit's products link no server stack); it has its
# own .build. Tests use its debug build (Sources/ProviderTesting/MediaServer.swift finds it),
# demo and bench its release build. SWIFTPM_FLAGS are not passed to it (a --scratch-path there
# would be shared by both packages); MEDIA_SERVER_FLAGS are.
MEDIA_SERVER_PACKAGE := Servers/media-server
MEDIA_SERVER_FLAGS ?=
MEDIA_SERVER    ?= $(CURDIR)/$(MEDIA_SERVER_PACKAGE)/.build/release/media-server

# make install PREFIX=/usr/local (default ~/.local); DESTDIR stages for packagers.
PREFIX          ?= $(HOME)/.local
DESTDIR         ?=
BINDIR          ?= $(PREFIX)/bin
LIBEXECDIR      ?= $(PREFIX)/libexec/fileprovider
MANDIR          ?= $(PREFIX)/share/man
DATADIR         ?= $(PREFIX)/share
# make install-backends: where the reference external backends go (a folder fileproviderctl
# searches: one of PATH, or $XDG_DATA_HOME/fileprovider/backends).
BACKENDDIR      ?= $(BINDIR)
INSTALL_ENV      = PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" BINDIR="$(BINDIR)" LIBEXECDIR="$(LIBEXECDIR)" MANDIR="$(MANDIR)" DATADIR="$(DATADIR)" BACKENDDIR="$(BACKENDDIR)"

.DEFAULT_GOAL := help
.PHONY: help deps build release man install install-backends uninstall media-server test demo bench format clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

deps: ## Install missing apt packages (idempotent)
	@scripts/install-deps.sh

build: ## Debug build of every target
	$(SWIFT) build $(SWIFTPM_FLAGS)

release: deps ## Release build of fileproviderctl, fileprovider-guard (and the man page beside them) and media-server (the demo and benchmarks use them)
	$(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_FLAGS)
	$(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_BUILD) --product fileprovider-guard
	@cp "$$(scripts/manual.sh $(SWIFTPM_FLAGS) $(RELEASE_BUILD))" "$$($(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_BUILD) --show-bin-path)/fileproviderctl.1"
	$(SWIFT) build --package-path $(MEDIA_SERVER_PACKAGE) $(MEDIA_SERVER_FLAGS) $(RELEASE_BUILD) --product media-server

man: deps ## The man page, from the commands (swift-argument-parser's generate-manual plugin)
	@scripts/manual.sh $(SWIFTPM_FLAGS) $(RELEASE_BUILD)

install: deps ## Install under PREFIX (default ~/.local): program, guard, man page, bash/zsh/fish completions, systemd user unit
	$(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_FLAGS)
	$(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_BUILD) --product fileprovider-guard
	@$(INSTALL_ENV) scripts/install.sh install "$$($(SWIFT) build $(SWIFTPM_FLAGS) $(RELEASE_BUILD) --show-bin-path)" \
		"$$(scripts/manual.sh $(SWIFTPM_FLAGS) $(RELEASE_BUILD))"

install-backends: deps ## Install the reference external backends pyfolder (Python) and cfolder (C, built with $(CC)) into BACKENDDIR (default PREFIX/bin)
	@$(INSTALL_ENV) CC="$(CC)" scripts/install.sh install-backends

uninstall: ## Remove what install and install-backends put under PREFIX (keeps the state folder and its domains)
	@$(INSTALL_ENV) scripts/install.sh uninstall

media-server: deps ## Debug build of media-server (its own package, Servers/media-server), which the tests start
	$(SWIFT) build --package-path $(MEDIA_SERVER_PACKAGE) $(MEDIA_SERVER_FLAGS)

# Suites run in a second `swift test` process, after the rest: the FUSE suites mount, sync and
# drop the kernel's caches (beside the rest they stalled unrelated time-bound tests for minutes);
# the S3 suites start a five-process SeaweedFS cluster and moto, whose CPU starved the hostile
# store suites past their time limits when everything ran at once on two cores.
OWN_PROCESS_SUITES = FUSEProgramTests|FUSEChangeFeedTests|FolderThumbnailTests|FolderStatusTests|FUSESessionTests|FUSEServerProcessTests|FUSEReplicaTests|FUSEAccessRulesTests|OnAccessProgramTests|OnAccessConversionTests|S3AdapterTests|S3CLITests

test: deps media-server ## Build and run all tests, then scripts/test-*.sh in order
	$(SWIFT) build $(SWIFTPM_FLAGS) --build-tests
	$(SWIFT) build $(SWIFTPM_FLAGS) --product generate-manual
	@SWIFT="$(SWIFT)" scripts/swift-test.sh $(SWIFTPM_FLAGS) --skip '$(OWN_PROCESS_SUITES)'
	@SWIFT="$(SWIFT)" scripts/swift-test.sh $(SWIFTPM_FLAGS) --filter '$(OWN_PROCESS_SUITES)'
	@set -e; for t in $$(ls scripts/test-*.sh 2>/dev/null | LC_ALL=C sort); do \
		echo "==> $$t"; bash "$$t"; \
	done

demo: release ## Run scripts/demo.sh against a throwaway home
	FILEPROVIDERCTL="$(FILEPROVIDERCTL)" MEDIA_SERVER="$(MEDIA_SERVER)" scripts/demo.sh

bench: release ## Run the benchmarks and update Docs/Performance.md
	FILEPROVIDERCTL="$(FILEPROVIDERCTL)" MEDIA_SERVER="$(MEDIA_SERVER)" $(PYTHON) Benchmarks/bench.py $(BENCH_ARGS)

format: ## swift format Sources, Adapters, Servers and Tests in place
	$(SWIFT) format -i -r Sources Adapters Servers/media-server/Sources Tests

clean: ## Remove build products and the demo home (keeps Benchmarks/data)
	rm -rf .build $(MEDIA_SERVER_PACKAGE)/.build demo-home
