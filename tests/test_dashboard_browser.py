"""The dashboard in a real browser: Debian's headless Chromium, driven by Playwright, against
`manifold serve --http` with real fixture servers. One gateway and one browser page for the module.

Skipped, saying why, where Chromium or Playwright is missing (`make test` installs both where it can).
With MANIFOLD_SCREENSHOTS=DIR the last test saves a PNG of each panel there (the ones in docs/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import free_port, server_entry, stop_process, wait_for_port

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed: `apt-get install chromium` as root (make test does it where it can)",
        allow_module_level=True,
    )

# What works on these machines: no sandbox for root, no network but loopback, a fresh profile.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000
# expect() has its own timeout (5 s), too short for the first search on a busy machine: the search model loads.
sync_api.expect.set_options(timeout=WAIT_MS)


class Served:
    """The gateway under test: its config file, its URLs, and a way to call it as an MCP client."""

    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.base = f"http://127.0.0.1:{port}"

    def call(self, name: str, arguments: dict[str, Any], mode: str = "legacy") -> Any:
        """One MCP client call, on a thread of its own (Playwright's sync API holds this thread's loop)."""

        async def call() -> Any:
            async with Client(f"{self.base}/mcp", mode=mode) as client:
                return await client.call_tool(name, arguments)

        with ThreadPoolExecutor(1) as thread:
            return thread.submit(anyio.run, call).result(timeout=60)

    def servers(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"{self.base}/ui/api/overview", timeout=10) as response:
            return {server["name"]: server for server in json.load(response)["servers"]}


def _settings(tmp_path: Path) -> dict[str, Any]:
    return {"manifold": {"data_dir": str(tmp_path / "data"), "lazy": False, "ping_interval": 0}}


# A hub instance registered by a hostile local program: its name is markup, and nothing answers at its address.
HOSTILE_INSTANCE = '<img src=x onerror="document.title=1">'


def _with_hub(tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` exposing the hub too, over a discovery dir with one registered instance (`HOSTILE_INSTANCE`)."""
    from mcp_manifold._runtime.discovery import write_record
    from mcp_manifold._runtime.registration import build_record

    folder = tmp_path / "instances"
    url = f"http://127.0.0.1:{free_port()}/mcp"
    write_record(folder, build_record(HOSTILE_INSTANCE, url=url, instance_id="odd", pid=os.getpid()))
    data["manifold"].update(expose=["direct", "hub"], discovery_dir=str(folder))
    return data


def config_data(tmp_path: Path, **extra_servers: Any) -> dict[str, Any]:
    servers = {
        "numbers": server_entry("numbers.py"),
        "kitchen": server_entry("kitchen.py"),
        "broken": server_entry("exits_early.py"),
        **extra_servers,
    }
    return {"mcpServers": servers, **_settings(tmp_path)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp_path = tmp_path_factory.mktemp("dashboard")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(_with_hub(tmp_path, config_data(tmp_path)), indent=2))
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process)
        yield Served(config, port)
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, url: str) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(WAIT_MS)
    page.goto(url)
    return page


@pytest.fixture(scope="module")
def page(browser: Any, served: Served) -> Any:
    return new_page(browser, f"{served.base}/ui/")


def row(page: Any, panel: str, **data: str) -> Any:
    selector = "".join(f'[data-{key}="{value}"]' for key, value in data.items())
    return page.locator(f"#{panel} tr{selector}")


def test_the_servers_panel_shows_each_server_and_why_one_failed(page: Any) -> None:
    numbers = row(page, "servers", server="numbers", state="ready")
    numbers.wait_for()
    assert numbers.locator(".tools").inner_text() == "3"
    assert numbers.locator(".breaker").inner_text() == "closed"
    assert numbers.locator(".protocol").inner_text() == "2026-07-28"  # what the server speaks
    broken = row(page, "servers", server="broken", state="failed")
    broken.wait_for()
    assert "fatal: missing API key" in broken.inner_text()
    assert "failed" in broken.locator(".state").inner_text()


def test_the_servers_panel_shows_hub_instances_their_names_as_text(page: Any) -> None:
    """The overview carried the hub's instances, but the page showed none (only `manifold servers` did)."""
    odd = page.locator('#instance-rows tr[data-instance="odd"]')
    odd.wait_for()
    assert HOSTILE_INSTANCE in odd.inner_text()  # as text: no element made of it
    assert page.locator("#instances img").count() == 0 and page.title() == "mcp-manifold"


def test_the_tools_panel_lists_and_filters_tools_with_their_server(page: Any) -> None:
    row(page, "tools", tool="kitchen_echo", server="kitchen", pin="pinned").wait_for()  # pinning: warn, the default
    assert row(page, "tools", tool="numbers_multiply", server="numbers").count() == 1
    page.fill("#tool-filter", "multiply")
    sync_api.expect(page.locator("#tool-rows tr")).to_have_count(1)
    assert row(page, "tools", tool="numbers_multiply").count() == 1
    assert "(1 of " in page.inner_text("#tool-count")
    page.fill("#tool-filter", "")


def test_the_search_playground_ranks_tools_as_retrieve_tools_does(page: Any) -> None:
    page.fill("#search-query", "multiply two numbers")
    page.click("#search-form button")
    first = page.locator("#search-rows tr").first
    sync_api.expect(first).to_have_attribute("data-tool", "numbers_multiply")
    score = float(first.locator("td").nth(1).inner_text())
    assert score > 0
    assert "ranked as retrieve_tools ranks them" in page.inner_text("#search-note")


def test_calls_of_both_eras_appear_in_recent_calls_without_a_reload(page: Any, served: Served) -> None:
    served.call("numbers_add", {"a": 20, "b": 22})
    served.call("kitchen_fail", {"message": "on purpose"})
    served.call("numbers_multiply", {"a": 6, "b": 7}, mode="auto")  # a 2026-07-28 client, with no session
    row(page, "calls", tool="numbers_add", outcome="ok").wait_for()
    row(page, "calls", tool="kitchen_fail", outcome="error").wait_for()
    row(page, "calls", tool="numbers_multiply", outcome="ok").wait_for()
    sync_api.expect(page.locator("#summary")).to_contain_text(re.compile(r"2026-07-28: [1-9]\d* request"))


def test_a_config_edit_shows_up_live_and_the_check_passes(page: Any, served: Served) -> None:
    assert page.locator("#config-body .badge").first.inner_text() == "OK"
    data = _with_hub(served.config.parent, config_data(served.config.parent, words=server_entry("words.py")))
    served.config.write_text(json.dumps(data, indent=2))
    row(page, "servers", server="words", state="ready").wait_for()
    row(page, "tools", tool="words_upper", server="words").wait_for()
    applied = page.locator('#config tr[data-reload="applied"]').first
    applied.wait_for()
    assert "added: words" in applied.inner_text()


def test_a_killed_server_turns_dead(page: Any, served: Served) -> None:
    pid = served.servers()["kitchen"]["pid"]
    assert pid
    os.kill(pid, signal.SIGKILL)
    dead = row(page, "servers", server="kitchen", state="failed")
    dead.wait_for()
    assert "failed" in dead.locator(".state").inner_text()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[str]:
    """A gateway in this process whose HTTP front wants an API key (the config's `auth` section, as a
    team gateway has it); yields the dashboard's URL."""
    import uvicorn

    from mcp_manifold._config import load_config
    from mcp_manifold._front.http import build_app
    from mcp_manifold._runtime.gateway import Gateway

    config = tmp_path / "mcp.json"
    data = {"mcpServers": {"numbers": server_entry("numbers.py")}, **_settings(tmp_path)}
    # The page sends a key as a bearer token; the operator's shows everything, the guest's its own tools.
    data["auth"] = {
        "api_keys": {"operator": "let-me-in-operator-key", "guest": "let-me-in-guest-key-0"},
        "operators": ["operator"],
    }
    data["profiles"] = {"adder": {"principals": ["guest"], "tools": ["numbers_add"]}}
    config.write_text(json.dumps(data))
    port = free_port()
    servers: list[Any] = []

    async def serve() -> None:
        async with Gateway(load_config(config)) as gateway, AsyncExitStack() as stack:
            app = build_app(gateway, "127.0.0.1", stack)
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
            servers.append(server)
            await server.serve()

    with ThreadPoolExecutor(1) as thread:
        running = thread.submit(anyio.run, serve)
        try:
            wait_for_port(port)
            yield f"http://127.0.0.1:{port}/ui/"
        finally:
            if servers:
                servers[0].should_exit = True
            running.result(timeout=30)


def test_behind_a_guard_the_page_asks_for_a_token(browser: Any, guarded: str) -> None:
    page = new_page(browser, guarded)
    try:
        sync_api.expect(page.locator("#auth")).to_be_visible()
        assert page.locator("#server-rows tr").count() == 0  # nothing shown without the token
        page.fill("#auth-token", "wrong")
        page.click("#auth button")
        sync_api.expect(page.locator("#live")).to_have_attribute("title", "not updating: the token was refused")
        sync_api.expect(page.locator("#auth")).to_be_visible()
        page.fill("#auth-token", "let-me-in-operator-key")
        page.click("#auth button")
        row(page, "servers", server="numbers").wait_for()
        sync_api.expect(page.locator("#auth")).to_be_hidden()
    finally:
        page.close()


def test_a_non_operator_sees_only_its_own_tools(browser: Any, guarded: str) -> None:
    page = new_page(browser, guarded)
    try:
        sync_api.expect(page.locator("#auth")).to_be_visible()
        page.fill("#auth-token", "let-me-in-guest-key-0")
        page.click("#auth button")
        row(page, "tools", tool="numbers_add").wait_for()
        sync_api.expect(page.locator("#summary")).to_contain_text("your own view")
        for panel in ("servers", "calls", "config"):
            sync_api.expect(page.locator(f"#{panel}")).to_be_hidden()
        assert page.locator("#tool-rows tr").count() == 1  # numbers_multiply is not the guest's
        page.fill("#search-query", "multiply two numbers")
        page.click("#search-form button")
        sync_api.expect(page.locator("#search-note")).to_contain_text("1 tool(s)")
        assert page.locator("#search-rows tr").count() == 1
        assert page.locator("#search-rows tr").first.get_attribute("data-tool") == "numbers_add"
    finally:
        page.close()


def test_screenshots_of_each_panel(page: Any, tmp_path: Path) -> None:
    folder = Path(os.environ.get("MANIFOLD_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.fill("#tool-filter", "")
    for panel in ("servers", "tools", "search", "calls", "config"):
        path = folder / f"dashboard-{panel}.png"
        page.locator(f"#{panel}").screenshot(path=str(path))
        assert path.stat().st_size > 1000, panel
    page.screenshot(path=str(folder / "dashboard.png"), full_page=True)
