# Two commands on a fresh machine: `make demo` and `make test`. Everything they need is installed here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NODE_DIR := tests/node
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench setup node browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# The published reference server, for the integration tests; skipped quietly where node is absent.
node:
	@if command -v npm >/dev/null 2>&1; then \
		if [ ! -d $(NODE_DIR)/node_modules/@modelcontextprotocol/server-everything ]; then \
			cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error; \
		fi; \
	else echo "node/npm not found: the server-everything tests will be skipped"; fi

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

test: setup node browser
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -q

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

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules .pytest_cache .ruff_cache
