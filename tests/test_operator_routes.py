"""/metrics and the dashboard's JSON API, on the HTTP front's real app, with a real gateway and servers.

The app `build_app` assembles is called in this process (httpx's ASGI transport: the routes, the
checks and the serialisation are the real ones, without a socket); a client talks MCP to the same
gateway, so what it does shows in the numbers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import JSONResponse

from mcp_manifold._config import load_config
from mcp_manifold._front.http import build_app
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime import metrics
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8765"
OPERATIONS = Path(__file__).parent.parent / "docs" / "operations.md"


def write(tmp_path: Path, **settings: Any) -> Path:
    path = tmp_path / "mcp.json"
    servers = {"numbers": server_entry("numbers.py"), "kitchen": server_entry("kitchen.py")}
    manifold = {"data_dir": str(tmp_path / "data"), "ping_interval": 0, "expose": ["direct", "retrieve"], **settings}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
    return path


class Front:
    def __init__(self, gateway: Gateway, http: httpx.AsyncClient, client: Client) -> None:
        self.gateway, self.http, self.client = gateway, http, client

    async def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in await self.families()
            for sample in family.samples
        }

    async def families(self) -> list[Any]:
        response = await self.http.get("/metrics")
        assert response.status_code == 200, response.text
        return list(text_string_to_metric_families(response.text))


@pytest.fixture
async def front(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Front]:
    monkeypatch.setattr(metrics, "TOOL_LABELS", 3)  # small, to see the bound at work
    path = write(tmp_path, spill_threshold=2000)
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
            Client(McpFront(gateway).server, mode="legacy") as client,
        ):
            yield Front(gateway, http, client)


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_calls_and_show_the_state_of_every_server(front: Front) -> None:
    client = front.client
    for _ in range(2):
        await client.call_tool("numbers_add", {"a": 1, "b": 2})
    assert (await client.call_tool("kitchen_fail", {"message": "nope"})).is_error
    await client.call_tool("kitchen_huge", {"size": 5000})  # above spill_threshold: spilled
    await client.call_tool("numbers_multiply", {"a": 2, "b": 3})  # the 4th distinct tool: past the bound
    await client.read_resource("kitchen+kitchen://text")
    await client.call_tool("retrieve_tools", {"query": "add two numbers"})

    samples = await front.samples()
    assert value(samples, "manifold_tool_calls_total", server="numbers", tool="add", outcome="ok") == 2
    assert value(samples, "manifold_tool_calls_total", server="kitchen", tool="fail", outcome="error") == 1
    assert value(samples, "manifold_tool_calls_total", server="numbers", tool="_other", outcome="ok") == 1
    assert value(samples, "manifold_reads_total", server="kitchen", kind="resource", outcome="ok") == 1
    assert value(samples, "manifold_call_duration_seconds_count", server="numbers", kind="tool") == 3
    assert value(samples, "manifold_backend_duration_seconds_count", server="numbers", kind="tool") == 3
    assert value(samples, "manifold_gateway_added_seconds_count", kind="tool") == 5
    assert value(samples, "manifold_spilled_results_total", server="kitchen") == 1
    assert value(samples, "manifold_spill_written_bytes_total") >= 5000
    assert value(samples, "manifold_spill_bytes") >= 5000
    assert value(samples, "manifold_search_duration_seconds_count") == 1
    assert value(samples, "manifold_search_index_tools") == len(front.gateway.catalog.tool_entries()) > 0

    assert value(samples, "manifold_backend_state", server="numbers", state="ready") == 1
    assert value(samples, "manifold_backend_state", server="numbers", state="failed") == 0
    assert value(samples, "manifold_backend_breaker_state", server="kitchen", state="closed") == 1
    assert value(samples, "manifold_backend_restarts_total", server="kitchen") == 0
    assert value(samples, "manifold_backend_tools", server="numbers") == 3
    assert value(samples, "manifold_sessions", era="session") == 1  # the client above
    assert value(samples, "manifold_config_reloads_total", result="applied") == 0

    documented = OPERATIONS.read_text()
    for family in await front.families():
        if family.name.startswith("manifold_") and not family.name.endswith("_created"):
            assert f"`{family.name}" in documented, f"{family.name} is not in docs/operations.md"


async def test_a_killed_server_shows_as_failed_with_a_restart_after(front: Front) -> None:
    await front.client.call_tool("kitchen_echo", {"text": "up"})
    assert (await front.client.call_tool("kitchen_crash", {})).is_error
    samples = await front.samples()
    assert value(samples, "manifold_backend_state", server="kitchen", state="failed") == 1
    await front.client.call_tool("kitchen_echo", {"text": "back"})
    samples = await front.samples()
    assert value(samples, "manifold_backend_state", server="kitchen", state="ready") == 1
    assert value(samples, "manifold_backend_restarts_total", server="kitchen") == 1


async def test_the_dashboard_api_answers_and_names_bad_input(front: Front) -> None:
    http = front.http
    await front.client.call_tool("numbers_add", {"a": 1, "b": 2})
    overview = (await http.get("/ui/api/overview")).json()
    assert {server["name"] for server in overview["servers"]} == {"numbers", "kitchen"}
    assert overview["gateway"]["sessions"] == {"session": 1}
    assert overview["config"]["ok"] is True and overview["config"]["problems"] == []

    tools = (await http.get("/ui/api/tools")).json()["tools"]
    assert any(tool["name"] == "numbers_add" and tool["server"] == "numbers" for tool in tools)
    found = (await http.get("/ui/api/search", params={"q": "add two numbers", "limit": 3})).json()
    assert found["matches"][0]["name"] == "numbers_add" and len(found["matches"]) <= 3
    assert found["matches"][0]["score"] >= found["matches"][-1]["score"]
    calls = (await http.get("/ui/api/calls", params={"after": 0})).json()
    assert [(call["name"], call["outcome"]) for call in calls["calls"]] == [("numbers_add", "ok")]
    assert (await http.get("/ui/api/calls", params={"after": calls["last"]})).json()["calls"] == []

    for path, params, problem in [
        ("/ui/api/search", {}, "give a query"),
        ("/ui/api/search", {"q": "x", "limit": "lots"}, "limit must be a whole number"),
        ("/ui/api/search", {"q": "x", "limit": 0}, "limit must be from 1 to 50"),
        ("/ui/api/calls", {"after": "yesterday"}, "after must be a whole number"),
    ]:
        response = await http.get(path, params=params)
        assert response.status_code == 400 and problem in response.json()["error"], (path, params)

    page = await http.get("/ui/")
    assert page.status_code == 200 and "dashboard.js" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert (await http.get("/ui/../mcp.json")).status_code == 404


async def test_the_config_panel_shows_what_config_check_says(front: Front, tmp_path: Path) -> None:
    path = front.gateway.config.path
    assert path is not None
    data = json.loads(path.read_text())
    data["mcpServers"]["numbers"]["timeout"] = -1
    path.write_text(json.dumps(data))
    config = (await front.http.get("/ui/api/overview")).json()["config"]
    assert config["ok"] is False
    assert any("numbers" in problem and "timeout" in problem for problem in config["problems"])


async def test_operator_routes_refuse_a_rebound_host_name(front: Front) -> None:
    for path in ("/metrics", "/ui/api/overview"):
        refused = await front.http.get(path, headers={"Host": "evil.example:8765"})
        assert refused.status_code == 421, path
        cross = await front.http.get(path, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403, path


async def test_metrics_and_dashboard_can_be_turned_off(tmp_path: Path) -> None:
    gateway = Gateway(load_config(write(tmp_path, metrics=False, dashboard=False)))
    async with AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            assert (await http.get("/metrics")).status_code == 404
            assert (await http.get("/ui/")).status_code == 404


async def test_a_guard_wraps_metrics_and_the_dashboard_api(tmp_path: Path) -> None:
    """The seam for the HTTP front's authentication: every operator route that shows data goes through it."""

    def guard(app: Any) -> Any:
        async def checked(scope: Any, receive: Any, send: Any) -> None:
            if (b"authorization", b"Bearer letmein") not in scope["headers"]:
                await JSONResponse({"error": "invalid_token"}, status_code=401)(scope, receive, send)
                return
            await app(scope, receive, send)

        return checked

    gateway = Gateway(load_config(write(tmp_path)))
    async with AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack, guard=guard)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            token = {"Authorization": "Bearer letmein"}
            for path in ("/metrics", "/ui/api/tools", "/ui/api/calls"):
                assert (await http.get(path)).status_code == 401, path
                assert (await http.get(path, headers=token)).status_code == 200, path
            assert (await http.get("/ui/")).status_code == 200  # the page holds no data; it asks for a token
