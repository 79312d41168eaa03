"""An MCP Apps server behind the gateway, rendered by a real host: the ext-apps AppBridge in headless Chromium.

The server is the ext-apps example `@modelcontextprotocol/server-basic-vanillajs` (over stdio behind the
gateway). The test is the host: an SDK client of the gateway that declares Apps support, lists the tool,
reads its app through the gateway (the `ui://` URI the gateway rewrote), and renders it in a sandboxed
frame of tests/apps_host/host.html, where the AppBridge connects to it. The app's button calls the server's
tool by the server's own name (`get-time`); the bridge hands that call to the test, which makes it through
the gateway. Needs `npm ci && npm run build` in tests/apps_host (make node) and Debian's chromium.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise

from tests.conftest import free_port, stop_process, wait_for_port

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HOST = Path(__file__).parent / "apps_host"
BASIC = HOST / "node_modules" / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
if not Path(CHROMIUM).exists() or not (HOST / "host-bridge.js").exists() or not BASIC.exists():
    pytest.skip(
        "needs Debian's chromium and tests/apps_host built (`npm ci && npm run build` there; make node does it)",
        allow_module_level=True,
    )

FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]
WAIT_MS = 30_000
UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
T = TypeVar("T")


def in_thread(work: Callable[[], Awaitable[T]]) -> T:
    """Run async `work` on a thread of its own (Playwright's sync API holds this thread's event loop)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = anyio.run(work)
        except BaseException as exc:  # handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    if "error" in box:
        raise box["error"]
    return box["value"]


def host_client(url: str, mode: str) -> Client:
    """The host's MCP client: it declares that it renders apps."""
    return Client(url, mode=mode, extensions=[advertise(UI, {"mimeTypes": [APP_MIME]})])


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("apps-gateway")
    config = folder / "mcp.json"
    servers = {"basic": {"command": "node", "args": [str(BASIC), "--stdio"]}}
    config.write_text(json.dumps({"mcpServers": servers, "manifold": {"data_dir": str(folder / "data")}}))
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(config), "--http", "--port", str(port)]
    process = subprocess.Popen(command, env=dict(os.environ), start_new_session=True)
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def host_page_url() -> Iterator[str]:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(HOST))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/host.html"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_app_renders_and_calls_its_tool_through_the_gateway(
    browser: Any, gateway: str, host_page_url: str, mode: str
) -> None:
    async def open_app() -> tuple[str, Any, dict[str, Any]]:
        async with host_client(gateway, mode) as client:
            (tool,) = [tool for tool in (await client.list_tools()).tools if tool.name == "basic_get-time"]
            uri = tool.meta["ui"]["resourceUri"]
            (contents,) = (await client.read_resource(uri)).contents
            result = await client.call_tool(tool.name, {})
            return uri, contents, result.model_dump(by_alias=True, mode="json", exclude_none=True)

    uri, contents, result = in_thread(open_app)
    assert uri == "ui://basic+get-time/mcp-app.html"  # served by the gateway, still a ui:// URI
    assert contents.mime_type == APP_MIME and "get-time-btn" in contents.text

    calls: list[str] = []

    def host_call_tool(name: str, arguments: str) -> str:
        calls.append(name)

        async def call() -> dict[str, Any]:
            async with host_client(gateway, mode) as client:
                answer = await client.call_tool(name, json.loads(arguments))
                return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

        return json.dumps(in_thread(call))

    page = browser.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        page.expose_function("hostCallTool", host_call_tool)
        page.goto(host_page_url)
        page.wait_for_function("typeof window.startApp === 'function'")
        page.evaluate("([html, result]) => window.startApp(html, result)", [contents.text, result])
        page.wait_for_function("window.appReady === true")
        app = page.frame_locator("#app")
        shown = app.locator("#server-time")
        sync_api.expect(shown).not_to_have_text("Loading...", timeout=WAIT_MS)
        before = shown.inner_text()
        app.locator("#get-time-btn").click()
        sync_api.expect(shown).not_to_have_text(before, timeout=WAIT_MS)
        # The app named the tool as its server does; the gateway routed it there.
        assert calls == ["get-time"]
        assert shown.inner_text().startswith("20") and "ERROR" not in shown.inner_text()
    finally:
        page.close()
