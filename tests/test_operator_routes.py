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

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from mcp_manifold._config import load_config
from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._core.router import Target
from mcp_manifold._errors import NotFound
from mcp_manifold._front.http import build_app
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime import metrics
from mcp_manifold._runtime.call_path import CallRecord
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
    """One gateway for the module, its HTTP app, and two clients: one of each protocol era."""

    def __init__(self, gateway: Gateway, http: httpx.AsyncClient, client: Client, modern: Client) -> None:
        self.gateway, self.http, self.client, self.modern = gateway, http, client, modern

    async def samples(self, http: httpx.AsyncClient | None = None) -> Samples:
        response = await (http or self.http).get("/metrics")
        assert response.status_code == 200, response.text
        return Samples(text_string_to_metric_families(response.text))


class Samples:
    """One scrape: each sample's value by name and labels (0 when absent)."""

    def __init__(self, families: Any) -> None:
        self.families = list(families)
        self.values = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in self.families
            for sample in family.samples
        }

    def __call__(self, name: str, **labels: str) -> float:
        return self.values.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module-wide, so that one gateway serves every test here


@pytest.fixture(scope="module")
async def front(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Front]:
    # Pinning enforced, new tools quarantined: the tools panel's pins have something to show.
    folder = tmp_path_factory.mktemp("operator")
    path = write(folder, spill_threshold=2000, reload=False, pinning="enforce", pin_new_tools="quarantine")
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
            Client(McpFront(gateway).server, mode="legacy") as client,
            Client(McpFront(gateway).server, mode="auto") as modern,
        ):
            assert modern.protocol_version == "2026-07-28", modern.protocol_version
            yield Front(gateway, http, client, modern)


async def until(check: Any, timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not await check():
            await anyio.sleep(0.02)


async def test_metrics_count_the_calls_of_both_eras_and_show_the_state_of_every_server(front: Front) -> None:
    client, modern = front.client, front.modern
    before = await front.samples()
    await client.call_tool("numbers_add", {"a": 1, "b": 2})
    await modern.call_tool("numbers_add", {"a": 1, "b": 2})  # a 2026-07-28 client: counted the same way
    assert (await modern.call_tool("kitchen_fail", {"message": "nope"})).is_error
    await client.call_tool("kitchen_huge", {"size": 5000})  # above spill_threshold: spilled
    await modern.read_resource("kitchen+kitchen://text")
    await client.call_tool("retrieve_tools", {"query": "add two numbers"})

    after = await front.samples()

    def grew(name: str, **labels: str) -> float:
        return after(name, **labels) - before(name, **labels)

    assert grew("manifold_tool_calls_total", server="numbers", tool="add", outcome="ok") == 2
    assert grew("manifold_tool_calls_total", server="kitchen", tool="fail", outcome="error") == 1
    assert grew("manifold_reads_total", server="kitchen", kind="resource", outcome="ok") == 1
    assert grew("manifold_call_duration_seconds_count", server="numbers", kind="tool") == 2
    assert grew("manifold_backend_duration_seconds_count", server="numbers", kind="tool") == 2
    assert grew("manifold_gateway_added_seconds_count", kind="tool") == 4
    assert grew("manifold_spilled_results_total", server="kitchen") == 1
    assert grew("manifold_spill_written_bytes_total") >= 5000
    assert after("manifold_spill_bytes") >= 5000
    assert grew("manifold_search_duration_seconds_count") == 1
    assert after("manifold_search_index_tools") == len(front.gateway.catalog.tool_entries()) > 0

    assert after("manifold_backend_state", server="numbers", state="ready") == 1
    assert after("manifold_backend_state", server="numbers", state="failed") == 0
    assert after("manifold_backend_breaker_state", server="kitchen", state="closed") == 1
    assert after("manifold_backend_tools", server="numbers") == 3
    assert after("manifold_backend_protocol", server="numbers", version="2026-07-28") == 1
    assert after("manifold_sessions", era="session") == 1  # the legacy client; the modern one has no session
    assert after("manifold_sessions", era="stateless") == 0  # ... and no listen stream open yet
    assert grew("manifold_stateless_requests_total") >= 3
    assert grew("manifold_config_reloads_total", result="applied") == 0

    documented = OPERATIONS.read_text()
    for family in after.families:
        if family.name.startswith("manifold_") and not family.name.endswith("_created"):
            assert f"`{family.name}" in documented, f"{family.name} is not in docs/operations.md"


async def test_a_listen_stream_counts_as_a_connected_2026_client(front: Front) -> None:
    async def streams(count: int) -> bool:
        return (await front.samples())("manifold_sessions", era="stateless") == count

    async with front.modern.listen(tools_list_changed=True):
        await until(lambda: streams(1))
        overview = (await front.http.get("/ui/api/overview")).json()
        assert overview["gateway"]["clients"]["listen_streams"] == 1
    await until(lambda: streams(0))


async def test_tool_labels_are_bounded(front: Front, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "TOOL_LABELS", 2)  # small, to see the bound at work; read by a new app
    monkeypatch.setattr(metrics, "_SERIES_CACHED", 1)  # the series looked up again for nearly every call
    async with AsyncExitStack() as stack:
        app = build_app(front.gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            for name, arguments in [("add", {"a": 1, "b": 2}), ("multiply", {"a": 2, "b": 3})]:
                await front.client.call_tool(f"numbers_{name}", arguments)
            await front.modern.call_tool("kitchen_echo", {"text": "the third tool"})
            await front.client.call_tool("numbers_add", {"a": 1, "b": 1})  # seen before: keeps its label
            samples = await front.samples(http)
    assert samples("manifold_tool_calls_total", server="numbers", tool="add", outcome="ok") == 2
    assert samples("manifold_tool_calls_total", server="numbers", tool="multiply", outcome="ok") == 1
    assert samples("manifold_tool_calls_total", server="kitchen", tool="_other", outcome="ok") == 1
    assert samples("manifold_tool_calls_total", server="kitchen", tool="echo", outcome="ok") == 0


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_names_a_caller_made_up_take_no_tool_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A refused name no server has is the caller's choice (a refusal is observed when the caller has a
    profile): once it took a label, so a caller could fill them all and every real tool counted as `_other`."""
    monkeypatch.setattr(metrics, "TOOL_LABELS", 2)
    path = write(tmp_path, profile="everyone")
    path.write_text(json.dumps({**json.loads(path.read_text()), "profiles": {"everyone": {}}}))
    gateway = Gateway(load_config(path), serving=True)
    async with gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
            Client(McpFront(gateway).server, mode=mode) as client,
        ):
            for number in range(3):
                assert (await client.call_tool(f"made_up_{number}", {})).is_error
            await client.call_tool("numbers_add", {"a": 1, "b": 2})
            await client.call_tool("numbers_multiply", {"a": 2, "b": 3})
            response = await http.get("/metrics")
    samples = Samples(text_string_to_metric_families(response.text))
    assert samples("manifold_tool_calls_total", server="numbers", tool="add", outcome="ok") == 1
    assert samples("manifold_tool_calls_total", server="numbers", tool="multiply", outcome="ok") == 1
    assert samples("manifold_tool_calls_total", server="", tool="_other", outcome="denied") == 3
    assert "made_up" not in response.text


async def test_a_call_whose_error_is_no_utf8_never_breaks_the_recent_calls(front: Front) -> None:
    """A record quoting a lone surrogate (no UTF-8 encodes it) is served with ASCII escapes; before, the
    page's list of calls answered 500 to every operator until 200 more calls pushed it out."""
    last = (await front.http.get("/ui/api/calls")).json()["last"]
    target = Target("kitchen", "echo", "kitchen_echo", "direct")
    front.gateway.calls.refused(Request(Caller("odd")), "tool", target, NotFound("no tool 'a\ud800b' here"))
    await front.client.call_tool("numbers_add", {"a": 1, "b": 2})
    answer = await front.http.get("/ui/api/calls", params={"after": last})
    assert answer.status_code == 200, answer.text
    calls = answer.json()["calls"]
    assert [(call["name"], call["error"]) for call in calls] == [
        ("kitchen_echo", "no tool 'a\ud800b' here"),
        ("numbers_add", None),
    ]


def test_a_tool_call_counts_by_its_outcome_and_only_a_call_that_reached_its_server_in_the_backend_series() -> None:
    """Each call's series are looked up once per (server, tool, outcome) and kept: a call counts in its own
    outcome's, and a refused or cached call (no backend part) makes no empty backend series."""
    observed = metrics.GatewayMetrics(None)  # type: ignore[arg-type]  # counting needs no gateway

    def samples(metric: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in metric.collect()
            for sample in family.samples
            if "le" not in sample.labels
        }

    fail = Target("kitchen", "fail", "kitchen_fail", "direct")
    for outcome, backend in [("ok", 0.001), ("error", 0.001), ("ok", 0.002), ("denied", None), ("error", None)]:
        observed.observe_call(CallRecord("tool", fail, "c", 0.003, outcome, backend=backend))
    observed.observe_call(CallRecord("tool", Target("locked", "x", "locked_x", "direct"), "c", 0.0, "denied"))

    def label(**labels: str) -> frozenset[tuple[str, str]]:
        return frozenset(labels.items())

    calls = samples(observed.tool_calls)
    for outcome, count in [("ok", 2), ("error", 2), ("denied", 1)]:
        assert calls["manifold_tool_calls_total", label(server="kitchen", tool="fail", outcome=outcome)] == count
    assert (
        samples(observed.call_seconds)["manifold_call_duration_seconds_count", label(server="kitchen", kind="tool")]
        == 5
    )
    backend = samples(observed.backend_seconds)
    assert backend["manifold_backend_duration_seconds_count", label(server="kitchen", kind="tool")] == 3
    assert not [labels for _, labels in backend if ("server", "locked") in labels]  # only refused: no series


async def test_a_killed_server_shows_as_failed_with_a_restart_after(front: Front) -> None:
    await front.client.call_tool("kitchen_echo", {"text": "up"})
    restarts = (await front.samples())("manifold_backend_restarts_total", server="kitchen")
    assert (await front.client.call_tool("kitchen_crash", {})).is_error
    samples = await front.samples()
    assert samples("manifold_backend_state", server="kitchen", state="failed") == 1
    await front.client.call_tool("kitchen_echo", {"text": "back"})
    samples = await front.samples()
    assert samples("manifold_backend_state", server="kitchen", state="ready") == 1
    assert samples("manifold_backend_restarts_total", server="kitchen") == restarts + 1


async def test_the_dashboard_api_answers_and_names_bad_input(front: Front) -> None:
    http = front.http
    last = (await http.get("/ui/api/calls")).json()["last"]
    await front.client.call_tool("numbers_add", {"a": 1, "b": 2})
    await front.modern.call_tool("numbers_multiply", {"a": 2, "b": 3})
    overview = (await http.get("/ui/api/overview")).json()
    servers = {server["name"]: server for server in overview["servers"]}
    assert set(servers) == {"numbers", "kitchen"}
    assert servers["numbers"]["protocol"] == "2026-07-28"  # what the server speaks, as `manifold servers` shows
    clients = overview["gateway"]["clients"]
    assert clients["sessions"] == 1 and clients["stateless_requests"] >= 1 and clients["last_stateless_request"]
    assert overview["config"]["ok"] is True and overview["config"]["problems"] == []

    tools = (await http.get("/ui/api/tools")).json()["tools"]
    assert any(tool["name"] == "numbers_add" and tool["server"] == "numbers" for tool in tools)
    found = (await http.get("/ui/api/search", params={"q": "add two numbers", "limit": 3})).json()
    assert found["matches"][0]["name"] == "numbers_add" and len(found["matches"]) <= 3
    assert found["matches"][0]["score"] >= found["matches"][-1]["score"]
    calls = (await http.get("/ui/api/calls", params={"after": last})).json()
    assert [(call["name"], call["outcome"]) for call in calls["calls"]] == [
        ("numbers_add", "ok"),
        ("numbers_multiply", "ok"),  # the 2026-07-28 client's call shows like any other
        ("dashboard", "ok"),  # the search above: the gateway's own work for its caller, as retrieve_tools'
    ]
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


async def test_the_tools_panel_shows_each_tools_pin_and_a_quarantine(front: Front) -> None:
    http = front.http

    async def tools() -> dict[str, Any]:
        return {tool["name"]: tool for tool in (await http.get("/ui/api/tools")).json()["tools"]}

    async def revision() -> str:
        return (await http.get("/ui/api/overview")).json()["gateway"]["revision"]

    await front.client.list_tools()
    assert {"pin": "pinned", "quarantined": False}.items() <= (await tools())["numbers_add"].items()
    # A tool that appears later on a pinned server is quarantined: clients do not see it, the operator does.
    await front.client.call_tool("kitchen_add_tool", {"name": "sneaky"})
    await until(lambda: _has(tools, "kitchen_sneaky"))
    assert {"pin": "new", "quarantined": True}.items() <= (await tools())["kitchen_sneaky"].items()
    listed = {tool.name for tool in (await front.client.list_tools(cache_mode="refresh")).tools}
    assert "kitchen_sneaky" not in listed and "kitchen_echo" in listed
    # Approving it changes no listing; the panel is told to fetch the tools again all the same.
    before = await revision()
    front.gateway.pins.approve("kitchen", "sneaky")
    assert await revision() != before
    assert {"pin": "pinned", "quarantined": False}.items() <= (await tools())["kitchen_sneaky"].items()


async def _has(tools: Any, name: str) -> bool:
    return name in await tools()


async def test_the_config_panel_shows_what_config_check_says(front: Front) -> None:
    path = front.gateway.config.path
    assert path is not None
    good = path.read_text()
    data = json.loads(good)
    data["mcpServers"]["numbers"]["timeout"] = -1
    try:
        path.write_text(json.dumps(data))
        config = (await front.http.get("/ui/api/overview")).json()["config"]
        assert config["ok"] is False
        assert any("numbers" in problem and "timeout" in problem for problem in config["problems"])
    finally:
        path.write_text(good)
    assert (await front.http.get("/ui/api/overview")).json()["config"]["ok"] is True


async def test_a_config_problem_never_shows_the_password_of_the_url_it_quotes(front: Front) -> None:
    """A mistyped scheme quoted the whole URL, password included, to the dashboard (and the log, and
    `manifold config check`)."""
    path = front.gateway.config.path
    assert path is not None
    good = path.read_text()
    data = json.loads(good)
    data["mcpServers"]["remote"] = {"url": "htps://alice:hunter2-in-url@example.com/mcp?token=query-secret"}
    data["manifold"]["state_url"] = "http://:redis-password@127.0.0.1:6379"
    try:
        path.write_text(json.dumps(data))
        problems = (await front.http.get("/ui/api/overview")).json()["config"]["problems"]
    finally:
        path.write_text(good)
    shown = "\n".join(problems)
    assert "'htps://alice:***@example.com/mcp?token=***'" in shown and "'http://:***@127.0.0.1:6379'" in shown
    for secret in ("hunter2-in-url", "query-secret", "redis-password"):
        assert secret not in shown


@pytest.mark.parametrize(
    ("state_url", "reason"),
    [("redis://:redis-password@[::1", "Invalid IPv6 URL"), ("redis://:redis-password@h:99999", "Port out of range")],
)
async def test_a_state_url_python_cannot_parse_is_a_problem_the_config_panel_shows(
    front: Front, state_url: str, reason: str
) -> None:
    """urlsplit's ValueError escaped the check: the overview answered 500 to every operator while the file
    held it (and `manifold config check` printed a traceback)."""
    path = front.gateway.config.path
    assert path is not None
    good = path.read_text()
    data = json.loads(good)
    data["manifold"]["state_url"] = state_url
    try:
        path.write_text(json.dumps(data))
        answer = await front.http.get("/ui/api/overview")
    finally:
        path.write_text(good)
    assert answer.status_code == 200, answer.text
    shown = "\n".join(answer.json()["config"]["problems"])
    problem = "field 'state_url': must be a redis:// or rediss:// URL with a host, which Python cannot parse"
    assert f"{problem} ({reason}" in shown
    assert "redis-password" not in shown


async def test_without_auth_every_local_user_is_an_operator(front: Front) -> None:
    for route in ("/metrics", "/ui/api/overview", "/ui/api/calls", "/ui/api/tools"):
        assert (await front.http.get(route)).status_code == 200, route
    tools = {row["name"] for row in (await front.http.get("/ui/api/tools")).json()["tools"]}
    assert {"numbers_add", "kitchen_echo"} <= tools


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


async def test_authentication_wraps_metrics_and_the_dashboard_api(tmp_path: Path) -> None:
    """With an `auth` section, every operator route that shows data wants a key, as /mcp does, and an
    operator's: anyone else gets 403 and no data, except its own view of the tools."""
    path = write(tmp_path)
    data = json.loads(path.read_text())
    data["auth"] = {
        "api_keys": {"operator": "an-operator-key-0123", "guest": "a-guest-key-012345"},
        "operators": ["operator"],
    }
    path.write_text(json.dumps(data))
    gateway = Gateway(load_config(path))
    async with AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            token = {"Authorization": "Bearer an-operator-key-0123"}
            for route in ("/metrics", "/ui/api/tools", "/ui/api/calls", "/mcp"):
                refused = await http.get(route)
                assert refused.status_code == 401 and "Bearer" in refused.headers["www-authenticate"], route
                assert (await http.get(route, headers={"Authorization": "Bearer wrong-key-0123456"})).status_code == 401
            for route in ("/metrics", "/ui/api/tools", "/ui/api/calls"):
                assert (await http.get(route, headers=token)).status_code == 200, route
            guest = {"Authorization": "Bearer a-guest-key-012345"}
            for route in ("/metrics", "/ui/api/overview", "/ui/api/calls"):
                refused = await http.get(route, headers=guest)
                assert refused.status_code == 403 and "principal 'guest' is not an operator" in refused.text, route
            assert (await http.get("/ui/api/tools", headers=guest)).status_code == 200  # its own view
            assert (await http.get("/ui/")).status_code == 200  # the page holds no data; it asks for a token


async def test_a_non_operators_tools_revision_moves_only_with_what_it_sees(tmp_path: Path) -> None:
    """The tools panel's revision counted every catalog change and every pin: a principal whose profile
    hides a server saw it move when that server's tools changed, so learned that something it may not see
    is there and busy."""
    path = write(tmp_path, pinning="enforce", pin_new_tools="quarantine")
    data = json.loads(path.read_text())
    data["auth"] = {"api_keys": {"guest": "a-guest-key-012345"}}
    data["profiles"] = {"maths": {"principals": ["guest"], "servers": ["numbers"]}}
    path.write_text(json.dumps(data))
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        guest = {"Authorization": "Bearer a-guest-key-012345"}
        async with (
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http,
            Client(McpFront(gateway).server, mode="legacy") as operator,  # in process: no profile, sees all
        ):
            await gateway.ensure_catalog()
            before = (await http.get("/ui/api/tools", headers=guest)).json()
            assert {row["server"] for row in before["tools"]} == {"numbers"}
            await operator.call_tool("kitchen_add_tool", {"name": "hidden_new"})  # a new tool, quarantined

            async def listed() -> bool:
                return any(entry.name == "kitchen_hidden_new" for entry in gateway.catalog.tool_entries())

            await until(listed)
            assert (await http.get("/ui/api/tools", headers=guest)).json() == before


async def test_a_servers_error_of_a_megabyte_is_recorded_cut_short(tmp_path: Path) -> None:
    """A record kept a server's error whole (the audit line cuts it): erring.py's error of 1 MB, 20 calls, and
    the dashboard's recent calls held and served 20 MB (its last 200: 200 MB), a trace's span as much."""
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "ping_interval": 0}
    path.write_text(json.dumps({"mcpServers": {"erring": server_entry("erring.py")}, "manifold": manifold}))
    message = "it went wrong: " + "e" * 1_000_000
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            for mode in ("legacy", "auto"):
                async with Client(McpFront(gateway).server, mode=mode) as client:
                    answer = await client.call_tool("erring_fail", {"message": message})
                assert answer.is_error and message in answer.content[0].text  # type: ignore[union-attr]
            calls = (await http.get("/ui/api/calls")).json()["calls"]
    assert [call["outcome"] for call in calls] == ["error", "error"]
    for call in calls:
        assert "it went wrong: eeee" in call["error"] and call["error"].endswith(" characters)"), call["error"][-80:]
        assert len(call["error"]) < 2100


async def test_the_dashboards_search_is_within_the_callers_rate_limit(tmp_path: Path) -> None:
    """A search is the gateway's own work, as retrieve_tools' is: a key over its rate limit, refused that on
    /mcp, searched here without end (a long query costs the gateway a quarter of a second each)."""
    path = write(tmp_path, rate_limit=0.001, rate_burst=2, search_embedder="bm25")  # a bucket that never refills here
    data = json.loads(path.read_text())
    data["auth"] = {"api_keys": {"guest": "a-guest-key-012345", "ops": "an-operator-key-0123"}, "operators": ["ops"]}
    data["profiles"] = {"maths": {"principals": ["guest"], "servers": ["numbers"]}}
    path.write_text(json.dumps(data))
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            guest = {"Authorization": "Bearer a-guest-key-012345"}
            answers = [await http.get("/ui/api/search", params={"q": "add"}, headers=guest) for _ in range(3)]
            calls = (await http.get("/ui/api/calls", headers={"Authorization": "Bearer an-operator-key-0123"})).json()
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert {row["name"] for row in answers[0].json()["matches"]} <= {"numbers_add", "numbers_multiply", "numbers_sqrt"}
    refused = answers[2]
    assert refused.json()["error_description"].startswith("principal 'guest' is over its rate limit")
    assert int(refused.headers["retry-after"]) >= 1
    searches = [(call["kind"], call["name"], call["outcome"]) for call in calls["calls"]]
    assert searches == [("action", "dashboard", "ok")] * 2 + [("action", "dashboard", "rate_limited")]


async def test_a_long_stderr_line_is_kept_cut_short(front: Front) -> None:
    """Each stderr line was kept up to 64 KB, 200 of them: a server that logs big payloads put 12 MB in the
    overview every operator's page polls each second, and in the live status file rewritten every 2 s."""
    line = "payload: " + "x" * 60_000
    assert not (await front.client.call_tool("kitchen_stderr", {"text": line})).is_error

    async def kept() -> bool:
        servers = (await front.http.get("/ui/api/overview")).json()["servers"]
        kitchen = next(server for server in servers if server["name"] == "kitchen")
        return any(said.startswith("payload: ") for said in kitchen["stderr_tail"])

    await until(kept)
    servers = (await front.http.get("/ui/api/overview")).json()["servers"]
    kitchen = next(server for server in servers if server["name"] == "kitchen")
    said = next(said for said in kitchen["stderr_tail"] if said.startswith("payload: "))
    assert said == line[:2000] + f"... ({len(line)} characters)"


async def test_a_servers_name_of_megabytes_is_shown_cut_short(tmp_path: Path) -> None:
    """A server's name and version (serverInfo) were shown whole: one that named itself in 2 MB put it in
    every caller's dispatch list (past a client's 1 MB event: the list failed), and in the overview."""
    path = tmp_path / "mcp.json"
    servers = {"painted": server_entry("painted.py", "--name-length", "2000000")}
    manifold = {"data_dir": str(tmp_path / "data"), "ping_interval": 0, "expose": ["dispatch"]}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}))
    shown = "painted".ljust(200, "n") + "... (2000015 characters)"  # its name, a space and its version (14)
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        app = build_app(gateway, "127.0.0.1", stack)
        await gateway.ensure_catalog()  # started, so that it has named itself
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            for mode in ("legacy", "auto"):
                async with Client(McpFront(gateway).server, mode=mode) as client:
                    listed = await client.call_tool("proxy-dispatch", {"action": "list"})
                connections = json.loads(listed.content[0].text)["connections"]  # type: ignore[union-attr]
                assert [connection.get("serverInfo") for connection in connections] == [shown], mode
            overview = (await http.get("/ui/api/overview")).json()
    assert [server["server_info"] for server in overview["servers"]] == [shown]
