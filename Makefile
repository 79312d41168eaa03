# Two commands on a fresh machine: `make demo` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NODE_DIR := tests/node
STAMP  := $(VENV)/.installed
SERVERS_VENV := tests/.venv-servers
SERVERS_REQ  := tests/servers-requirements.txt

.PHONY: demo test lint bench bench-http setup node servers browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# The published npm servers and clients (server-everything, -filesystem, -memory, -sequential-thinking,
# the TypeScript SDK, the MCP Inspector CLI), pinned in tests/node/package-lock.json, for the integration
# tests. Installed again only when the lock file is newer than the install; without npm, or when the
# registry does not answer, those tests are skipped with the reason.
node:
	@if command -v npm >/dev/null 2>&1; then \
		if [ ! -f $(NODE_DIR)/node_modules/.package-lock.json ] \
			|| [ $(NODE_DIR)/package-lock.json -nt $(NODE_DIR)/node_modules/.package-lock.json ]; then \
			( cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error ) \
			|| echo "node: npm ci failed: the tests that need the npm servers will be skipped"; \
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

demo: setup
	$(BIN)/manifold serve --config examples/demo.json --http --host 127.0.0.1 --port 8765

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports --no-logo

# Two workers: most of a test's time is spent waiting on the servers it starts, so two files at a time
# fit a 2-core machine. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

test: setup node servers browser
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
	$(BIN)/python bench/http_throughput.py --with-lane-off

# Throughput over streamable HTTP (32 sessions x 200 calls, both client eras): the SDK's server by itself,
# the gateway in front of it over stdio and over HTTP, and the gateway with its HTTP fast lane off.
bench-http: setup
	$(BIN)/python bench/http_throughput.py --with-lane-off

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules $(SERVERS_VENV) .pytest_cache .ruff_cache
