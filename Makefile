# Two commands on a fresh machine: `make demo` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NODE_DIR := tests/node
STAMP  := $(VENV)/.installed
SERVERS_VENV := tests/.venv-servers
SERVERS_REQ  := tests/servers-requirements.txt

.PHONY: demo test lint bench bench-http setup node servers browser conformance scaleout containers clean

# Two installs into the one venv: what the gateway needs to run (`make demo`), and on top of it the test
# and lint tools (`make test`, `make lint`: pytest, ruff, import-linter, Playwright, OpenTelemetry).
BASE_STAMP := $(VENV)/.installed-base

$(BIN)/python:
	@echo "creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(BASE_STAMP): pyproject.toml | $(BIN)/python
	@echo "installing mcp-manifold and what it needs to run (no test tools) into $(VENV); about a minute"
	$(BIN)/pip install --progress-bar on --disable-pip-version-check -e .
	touch $(BASE_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing mcp-manifold with its test and lint tools into $(VENV)"
	@# quickjs-ng replaced the quickjs package (both install a module `quickjs`): an older venv drops it first.
	$(BIN)/pip uninstall -q -y quickjs 2>/dev/null || true
	$(BIN)/pip install -q --disable-pip-version-check -e ".[dev]"
	touch $(STAMP) $(BASE_STAMP)

setup: $(STAMP)

# The published npm servers and clients (server-everything, -filesystem, -memory, -sequential-thinking,
# the TypeScript SDK, the MCP Inspector CLI), pinned in tests/node/package-lock.json, for the integration
# tests; the MCP conformance suite with its Node 22, pinned in tests/conformance/node; the MCP Apps host
# bridge and example server (ext-apps), pinned in tests/apps_host. Installed again only when a lock file is
# newer than its install; without npm, or when the registry does not answer, those tests are skipped
# with the reason.
node:
	@if command -v npm >/dev/null 2>&1; then \
		if [ ! -f $(NODE_DIR)/node_modules/.package-lock.json ] \
			|| [ $(NODE_DIR)/package-lock.json -nt $(NODE_DIR)/node_modules/.package-lock.json ]; then \
			( cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error ) \
			|| echo "node: npm ci failed: the tests that need the npm servers will be skipped"; \
		fi; \
		if [ ! -f tests/conformance/node/node_modules/.package-lock.json ] \
			|| [ tests/conformance/node/package-lock.json -nt tests/conformance/node/node_modules/.package-lock.json ]; then \
			( cd tests/conformance/node && npm ci --no-audit --no-fund --loglevel=error ) \
			|| echo "node: the conformance suite could not be installed: its test will be skipped"; \
		fi; \
		if [ ! -f tests/apps_host/host-bridge.js ] || [ tests/apps_host/package-lock.json -nt tests/apps_host/host-bridge.js ]; then \
			( cd tests/apps_host && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build ) \
			|| echo "node: the MCP Apps host could not be installed: its browser test will be skipped"; \
		fi; \
	else echo "node/npm not found: the tests that need the npm servers will be skipped"; fi

# The published PyPI servers (mcp-server-time, -git, -fetch), pinned in $(SERVERS_REQ), in their own venv:
# they need mcp 1.x, the gateway mcp 2.x. Made again only when the requirements change (as bench/.venv-fastmcp).
servers:
	@if [ -f $(SERVERS_VENV)/.installed ] && [ $(SERVERS_VENV)/.installed -nt $(SERVERS_REQ) ]; then :; else \
		echo "servers: creating $(SERVERS_VENV) from $(SERVERS_REQ)"; rm -rf $(SERVERS_VENV); \
		( $(PYTHON) -m venv $(SERVERS_VENV) \
		  && $(SERVERS_VENV)/bin/pip install -q --disable-pip-version-check -r $(SERVERS_REQ) \
		  && touch $(SERVERS_VENV)/.installed ) \
		|| echo "servers: could not install $(SERVERS_REQ): the tests that need these servers will be skipped"; fi

# Debian's chromium, for the dashboard's browser test (Playwright drives it; it never downloads a browser).
# Installed as root where apt-get works; elsewhere that test is skipped and says why.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the dashboard's browser test"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ) \
		|| echo "chromium could not be installed: the dashboard's browser test will be skipped"; \
	else echo "chromium not found and apt-get needs root: the dashboard's browser test will be skipped"; fi

# Debian's redis-server and haproxy, for the scale-out tests (several replicas sharing state through Redis,
# behind HAProxy on loopback). Installed as root where apt-get works; elsewhere those tests are skipped
# and say why.
scaleout:
	@if command -v redis-server >/dev/null 2>&1 && command -v haproxy >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's redis-server and haproxy for the scale-out tests"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server haproxy >/dev/null ) \
		|| echo "redis-server or haproxy could not be installed: the scale-out tests will be skipped"; \
	else echo "redis-server or haproxy not found and apt-get needs root: the scale-out tests will be skipped"; fi

# podman and what deploy/check_podman.sh needs to build the image and bring docker-compose.yml up without
# a Docker engine or Docker Hub (debootstrap makes the stand-in base images). Installed as root where apt-get
# works; elsewhere that test is skipped and says why.
containers:
	@if command -v podman >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing podman, runc and debootstrap for the container image's test"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap runc uidmap curl python3-yaml \
		  slirp4netns fuse-overlayfs >/dev/null ) \
		|| echo "podman could not be installed: the container image's test will be skipped"; \
	else echo "podman not found and apt-get needs root: the container image's test will be skipped"; fi

demo: $(BASE_STAMP)
	$(BIN)/manifold serve --config examples/demo.json --http --host 127.0.0.1 --port 8765

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports --no-logo

# Two workers: most of a test's time is spent waiting on the servers it starts, so two files at a time
# fit a 2-core machine. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

test: setup node servers browser scaleout containers
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(BIN)/pip install -q -e ".[bench]"
	@# FastMCP goes into its own venv (never .venv); made once, remade only if `import fastmcp` fails there.
	@if bench/.venv-fastmcp/bin/python -c "import fastmcp" >/dev/null 2>&1; then :; else \
		echo "bench: creating bench/.venv-fastmcp with $${FASTMCP_SPEC:-fastmcp}"; rm -rf bench/.venv-fastmcp; \
		( $(PYTHON) -m venv bench/.venv-fastmcp \
		  && bench/.venv-fastmcp/bin/pip install -q --upgrade pip \
		  && bench/.venv-fastmcp/bin/pip install -q "$${FASTMCP_SPEC:-fastmcp}" ) \
		|| echo "bench: fastmcp could not be installed; overhead.py will skip the FastMCP rows"; fi
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/observers.py
	$(BIN)/python bench/http_app.py
	$(BIN)/python bench/http_app.py --era session
	$(BIN)/python bench/stdio_alone.py
	$(BIN)/python bench/http_throughput.py --with-lane-off --with-plain --with-leg-off --with-gc-off --with-pipes --with-floor

# Throughput over streamable HTTP (32 sessions x 200 calls, both client eras): the SDK's server by itself,
# the gateway in front of it over stdio and over HTTP, the gateway in front of bench/bare_echo.py (a stdio
# server without the SDK, next to no CPU: the gateway's own capacity), the gateway with its HTTP fast lane off, with its
# raw backend legs off, with CPython's collector settings, the SDK's server and the stdio-backed
# gateway once more without uvloop and httptools, and the gateway in front of bench/kitchen_pipes.py (the
# SDK's server without its stdio transport's thread hops).
bench-http: setup
	$(BIN)/python bench/http_throughput.py --with-lane-off --with-plain --with-leg-off --with-gc-off --with-pipes --with-floor

# The MCP conformance suite (npm @modelcontextprotocol/conformance, pinned with the Node 22 it needs in
# tests/conformance/node): its client scenarios `initialize`, `tools_call`, `sse-retry` and the `auth`
# suite, with the gateway as the client under test (tests/conformance/client.py); then every server
# scenario against tests/servers/conformance_everything.mjs (TypeScript SDK, from tests/node) directly and
# through `manifold serve --http`, failing if a check that passes directly does not pass through the
# gateway (tests/conformance/server_scenarios.py). Needs npm.
conformance: setup
	@command -v npm >/dev/null 2>&1 || { echo "conformance: npm not found"; exit 1; }
	@$(MAKE) --no-print-directory node
	PYTHON=$(abspath $(BIN))/python tests/conformance/run.sh

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules tests/conformance/node/node_modules tests/conformance/results \
		tests/apps_host/node_modules tests/apps_host/host-bridge.js $(SERVERS_VENV) .pytest_cache .ruff_cache

# The fuzzer (tests/test_fuzz.py) for longer than `make test` gives it: FUZZ_MINUTES (default 10) shared by
# its gateways. It prints what it tried (lines per strategy and method, the answers) and every failure,
# and keeps that report in $(FUZZ_REPORT).
FUZZ_MINUTES ?= 10
FUZZ_REPORT ?= .manifold/fuzz-report.txt

.PHONY: fuzz
fuzz: setup
	@mkdir -p $(dir $(FUZZ_REPORT)) && rm -f $(FUZZ_REPORT)
	FUZZ_MINUTES=$(FUZZ_MINUTES) FUZZ_REPORT=$(abspath $(FUZZ_REPORT)) \
		$(BIN)/python -m pytest -q -s -n 0 tests/test_fuzz.py
	@echo "fuzz report: $(FUZZ_REPORT)"
