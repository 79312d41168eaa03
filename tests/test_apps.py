"""MCP Apps (the `io.modelcontextprotocol/ui` extension) and client extensions (SEP-2133) through the gateway."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.extension import advertise

from mcp_manifold._core.clients import Caller
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"


def apps_client() -> dict[str, Any]:
    """Client arguments that declare MCP Apps support (what an Apps host declares)."""
    return {"extensions": [advertise(UI, {"mimeTypes": [APP_MIME]})]}


def text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.parametrize("server_era", ["modern", "legacy"])
async def test_the_clients_extensions_reach_the_server(
    connect: Any, write_config: Callable[..., Path], server_era: str
) -> None:
    # A session-era server's session is told a client's extensions when it serves that client alone: over
    # stdio always, over HTTP with `session_scope: client` (a session-era client has a session of its own);
    # an anonymous 2026-07-28 client shares its session, which is told what all its clients declare.
    config = write_config({"apps": server_entry("apps.py", "--era", server_era, session_scope="client")})
    async with connect(config, **apps_client()) as client:
        assert text(await client.call_tool("apps_show_clock", {})) == "apps: yes"
    async with connect(config) as client:
        assert text(await client.call_tool("apps_show_clock", {})) == "apps: no"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_shared_session_declares_what_all_its_clients_declare(
    write_config: Callable[..., Path], http_gateway: Callable[..., str], mode: str
) -> None:
    from mcp import Client

    # One session-era session to the server, shared by every client of the gateway (the default scope).
    url = http_gateway(write_config({"apps": server_entry("apps.py", "--era", "legacy")}))
    async with Client(url, mode=mode, **apps_client()) as first, Client(url, mode=mode, **apps_client()) as second:
        assert text(await first.call_tool("apps_show_clock", {})) == "apps: yes"
        assert text(await second.call_tool("apps_show_clock", {})) == "apps: yes"
        async with Client(url, mode=mode) as plain:
            # A client that renders no apps joined: the session is opened again declaring what all share.
            assert text(await plain.call_tool("apps_show_clock", {})) == "apps: no"
            assert text(await first.call_tool("apps_show_clock", {})) == "apps: no"
        if mode == "legacy":
            # It went away (its session ended): the others' extensions are declared again.
            assert text(await first.call_tool("apps_show_clock", {})) == "apps: yes"
        # (A 2026-07-28 client has no session whose end says it left: it counts for client_session_idle.)


async def test_the_servers_extensions_are_the_gateways(
    write_config: Callable[..., Path], http_gateway: Callable[..., str]
) -> None:
    from mcp import Client

    config = write_config({"apps": server_entry("apps.py")})
    url = http_gateway(config)
    # Extensions are a 2026-07-28 capability (the SDK drops them from a 2025-11-25 answer): a 2026 client sees them.
    async with Client(url, mode="auto") as first:
        assert UI not in (first.server_capabilities.extensions or {})  # lazy: not started yet
        await first.call_tool("apps_plain", {"text": "x"})
    async with Client(url, mode="auto") as later:
        assert UI in (later.server_capabilities.extensions or {})


async def test_an_app_through_the_gateway(connect: Any, write_config: Callable[..., Path]) -> None:
    config = write_config({"apps": server_entry("apps.py")})
    exposed = "ui://apps+clock/app.html"  # the prefix inside the ui:// URI: hosts render only ui:// resources
    async with connect(config, **apps_client()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "apps_tick" not in tools and "tick" not in tools  # for its app only: not shown to the model
        assert tools["apps_show_clock"].meta == {"ui": {"resourceUri": exposed}}
        assert tools["apps_plain"].meta is None

        listed = {str(resource.uri): resource for resource in (await client.list_resources()).resources}
        assert listed[exposed].mime_type == APP_MIME
        read = await client.read_resource(exposed)
        (contents,) = read.contents
        assert str(contents.uri) == exposed
        assert contents.mime_type == APP_MIME
        assert contents.meta == {
            "ui": {"csp": {"connectDomains": ["https://time.example"]}, "permissions": {"clipboardWrite": {}}}
        }
        assert "clock app" in contents.text  # type: ignore[union-attr]

        shown = await client.call_tool("apps_show_clock", {})
        assert text(shown) == "apps: yes"
        assert shown.meta is not None and shown.meta["ui"] == {"resourceUri": exposed}

        # The app calls its tools by the gateway's names or by its own server's.
        assert text(await client.call_tool("apps_tick", {"n": 2})) == "tick 2"
        assert text(await client.call_tool("tick", {"n": 3})) == "tick 3"
        missing = await client.call_tool("tock", {})
        assert missing.is_error and "unknown tool" in text(missing)


def test_an_app_uri_keeps_its_scheme_and_comes_back() -> None:
    from mcp_manifold._core.naming import namespace_uri, split_uri

    exposed = namespace_uri("apps", "ui://clock/app.html")
    assert exposed == "ui://apps+clock/app.html"
    assert split_uri(exposed) == ("apps", "ui://clock/app.html")
    assert split_uri("ui://clock/app.html") is None  # no prefix: the server's own URI
    assert namespace_uri("", "ui://clock/app.html") == "ui://clock/app.html"


def test_app_meta_is_rewritten_and_visibility_read() -> None:
    from mcp_manifold._core.apps import callable_by_app, for_app_only, meta_with_exposed_app

    def exposed(uri: str) -> str:
        return "X" + uri

    meta = {"ui": {"resourceUri": "ui://a/b", "visibility": ["app"]}, "ui/resourceUri": "ui://a/b", "k": 1}
    assert meta_with_exposed_app(meta, exposed) == {
        "ui": {"resourceUri": "Xui://a/b", "visibility": ["app"]},
        "ui/resourceUri": "Xui://a/b",
        "k": 1,
    }
    assert meta_with_exposed_app({"k": 1}, exposed) is None
    assert for_app_only(meta) and callable_by_app(meta)
    assert not for_app_only({"ui": {"visibility": ["model", "app"]}}) and not for_app_only(None)
    assert not callable_by_app({"ui": {"visibility": ["model"]}}) and callable_by_app(None)


async def test_an_app_server_over_http(write_config: Callable[..., Path], http_gateway: Callable[..., str]) -> None:
    import subprocess
    import sys

    from mcp import Client

    from tests.conftest import SERVERS, free_port, stop_process, wait_for_port

    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVERS / "apps.py"), "--http", str(port)], start_new_session=True)
    try:
        wait_for_port(port, server)
        config = write_config({"apps": {"url": f"http://127.0.0.1:{port}/mcp"}})
        async with Client(http_gateway(config), mode="auto", **apps_client()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert tools["apps_show_clock"].meta == {"ui": {"resourceUri": "ui://apps+clock/app.html"}}
            assert "apps_tick" not in tools
            read = await client.read_resource("ui://apps+clock/app.html")
            assert read.contents[0].mime_type == APP_MIME
            assert text(await client.call_tool("apps_show_clock", {})) == "apps: yes"
            assert text(await client.call_tool("tick", {"n": 5})) == "tick 5"
    finally:
        stop_process(server)


async def test_a_restarted_gateway_declares_its_servers_extensions_at_once(write_config: Callable[..., Path]) -> None:
    from tests.conftest import stdio_gateway

    config = write_config({"apps": server_entry("apps.py")})
    async with stdio_gateway(config, mode="auto") as first:
        assert UI not in (first.server_capabilities.extensions or {})  # nothing started, nothing known yet
        await first.list_tools()  # starts and lists the server; its listing (extensions too) is cached
    async with stdio_gateway(config, mode="auto") as again:
        assert UI in (again.server_capabilities.extensions or {})  # before the server starts this time


class Declaring(Caller):
    """A client that declares `extensions`."""

    def __init__(self, extensions: dict[str, Any] | None) -> None:
        super().__init__()
        self.told = extensions

    @property
    def extensions(self) -> dict[str, Any] | None:
        return self.told


def test_what_clients_have_in_common() -> None:
    from mcp_manifold._core.common_extensions import CommonExtensions, intersect

    both = intersect([{UI: {"mimeTypes": [APP_MIME, "text/html"]}, "x/a": {}}, {UI: {"mimeTypes": [APP_MIME]}}])
    assert both == {UI: {"mimeTypes": [APP_MIME]}}
    assert intersect([{UI: {"v": 1, "w": 2}}, {UI: {"v": 1, "w": 3}}]) == {UI: {"v": 1}}
    assert intersect([{UI: {}}, {}]) is None and intersect([]) is None

    now = [0.0]
    clients = CommonExtensions(remember_for=60, clock=lambda: now[0])
    assert clients.common() is None  # no client yet: nothing promised
    session = Declaring({UI: {}})
    clients.client_arrived(session)
    clients.stateless_request(Declaring({UI: {}, "x/b": {}}))
    assert clients.common() == {UI: {}}
    clients.stateless_request(Declaring(None))
    assert clients.common() is None
    now[0] = 61.0  # the 2026-07-28 kinds are forgotten; the session-era client stays until it goes
    assert clients.common() == {UI: {}}
    session.close()
    assert clients.common() is None


def test_many_kinds_of_client_are_merged_without_changing_what_they_have_in_common() -> None:
    from mcp_manifold._core.common_extensions import MAX_KINDS, CommonExtensions

    now = [0.0]
    clients = CommonExtensions(remember_for=60, clock=lambda: now[0])
    clients.stateless_request(Declaring({UI: {"mimeTypes": [APP_MIME]}}))  # the oldest kind: merged first
    for n in range(MAX_KINDS * 3):  # kinds that a client can make up at will
        now[0] += 0.01
        clients.stateless_request(Declaring({UI: {"mimeTypes": [APP_MIME, "text/html"]}, f"x/{n}": {}}))
    assert len(clients._recent) <= MAX_KINDS
    assert clients.common() == {UI: {"mimeTypes": [APP_MIME]}}


async def test_a_server_without_a_prefix_cannot_shadow_another_servers_app(
    write_config: Callable[..., Path], http_gateway: Callable[..., str]
) -> None:
    """`shadow`, configured without a prefix, lists `ui://apps+clock/app.html` (the exposed URI of server `apps`'s
    clock app, with a password prompt) and names it as its own tool's app. Before, the later listing won: the host
    reading `apps_show_clock`'s app got `shadow`'s HTML, which no pin judged (it was not `apps`'s), and `show`
    was rendered in `apps`'s app. Now such URIs are left out: they are `apps`'s."""
    from mcp import Client

    servers = {"apps": server_entry("apps.py"), "shadow": server_entry("shadow.py", prefix="")}
    url = http_gateway(write_config(servers, {"pinning": "enforce"}))
    for mode in ("auto", "legacy"):
        async with Client(url, mode=mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            app = tools["apps_show_clock"].meta["ui"]["resourceUri"]  # type: ignore[index]
            assert app == "ui://apps+clock/app.html" and tools["show"].meta is None
            assert [r.name for r in (await client.list_resources()).resources if r.uri == app] == ["clock app"]
            assert "clock app" in (await client.read_resource(app)).contents[0].text  # type: ignore[union-attr]
            assert "ui" not in ((await client.call_tool("show", {"text": "hi"})).meta or {})  # nor in its result


async def test_a_profile_that_hides_an_apps_tools_hides_the_app(
    tmp_path: Path, http_gateway: Callable[..., str]
) -> None:
    """Before, a profile denying `apps_show_clock` and `apps_tick` (the tools that name the clock app) still listed
    and read the app, whose HTML names and calls them. An app is seen by a caller that may use one of its tools."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    config = tmp_path / "mcp.json"
    profiles = {"hidden": {"tools": ["*", "!apps_show_clock", "!apps_tick"]}, "ticks": {"tools": ["apps_tick"]}}
    servers = {"apps": server_entry("apps.py")}
    settings = {"data_dir": str(tmp_path), "expose": ["direct", "hub"]}
    config.write_text(json.dumps({"mcpServers": servers, "profiles": profiles, "manifold": settings}))
    url = http_gateway(config)
    app = "ui://apps+clock/app.html"
    for mode in ("auto", "legacy"):
        async with Client(f"{url}/p/hidden", mode=mode) as hidden:
            assert [r.uri for r in (await hidden.list_resources()).resources] == []
            with pytest.raises(MCPError, match=r"unknown resource 'ui://apps\+clock/app.html' for profile 'hidden'"):
                await hidden.read_resource(app)
            await hidden.call_tool("instances_connect", {"instance_id": "apps"})  # the hub: the server's own URIs
            assert [r.uri for r in (await hidden.list_resources()).resources] == []
            with pytest.raises(MCPError, match="unknown resource"):
                await hidden.read_resource("ui://clock/app.html")
        async with Client(f"{url}/p/ticks", mode=mode) as ticks:  # a tool that names it is its own
            assert [r.uri for r in (await ticks.list_resources()).resources] == [app]
            assert "clock app" in (await ticks.read_resource(app)).contents[0].text  # type: ignore[union-attr]


async def test_the_models_own_tools_never_reach_a_tool_for_its_app_only(
    write_config: Callable[..., Path], http_gateway: Callable[..., str]
) -> None:
    """`tick` is for its app only. An app calls it with `tools/call`; proxy's `call`, retrieve's `call_tool` and the
    hub's tools are the model's. Before, each of them called it, and `instances_connect` showed it to the model with
    its schema. Now it is unknown there, in the words a missing tool gets, and its app still calls it."""
    from mcp import Client

    config = write_config(
        {"apps": server_entry("apps.py")}, {"expose": ["direct", "proxy", "retrieve", "hub"], "search_embedder": "bm25"}
    )
    url = http_gateway(config)
    for mode in ("auto", "legacy"):
        async with Client(url, mode=mode) as client:
            for name in ("apps_tick", "tick"):
                through_proxy = await client.call_tool(
                    "proxy", {"action": "call", "type": "tool", "path": name, "args": {"n": 1}}
                )
                assert through_proxy.is_error and text(through_proxy).startswith(f"unknown tool '{name}'")
                retrieved = await client.call_tool("call_tool", {"name": name, "args": {"n": 1}})
                assert retrieved.is_error and text(retrieved).startswith(f"no tool named '{name}'")
            connected = text(await client.call_tool("instances_connect", {"instance_id": "apps"}))
            assert "tick" not in connected and "2 tool(s) (show_clock, plain)" in connected
            on_hub = await client.call_tool("instances_call", {"instance_id": "apps", "tool": "tick", "arguments": {}})
            assert on_hub.is_error and text(on_hub).endswith("has no tool 'tick' (its tools: show_clock, plain)")
            assert text(await client.call_tool("apps_tick", {"n": 2})) == "tick 2"  # its app's call
            if mode == "legacy":  # connected: the instance's tools are the session's, its app calls them as before
                assert "tick" not in [tool.name for tool in (await client.list_tools()).tools]
                assert text(await client.call_tool("tick", {"n": 3})) == "tick 3"
        async with Client(f"{url}/instances/apps", mode=mode) as at_its_address:  # the instance's own lists
            assert "tick" not in [tool.name for tool in (await at_its_address.list_tools()).tools]
            assert text(await at_its_address.call_tool("tick", {"n": 4})) == "tick 4"


async def test_a_registered_tool_its_server_makes_app_only_leaves_the_sessions_list(
    write_config: Callable[..., Path], http_gateway: Callable[..., str]
) -> None:
    """retrieve's `dynamic` routing registers what a search found as the session's own tools (session-era clients
    only: a 2026-07-28 client gets no list of its own). Before, a registered tool its server then made for its app
    only stayed in that list, shown to the model and called from it; now it leaves the list as a quarantined one."""
    from mcp import Client

    servers = {"turncoat": server_entry("turncoat.py", protocol="legacy")}
    url = http_gateway(
        write_config(
            servers, {"expose": ["retrieve"], "routing": "dynamic", "pinning": "off", "search_embedder": "bm25"}
        )
    )
    async with Client(url, mode="legacy") as client:
        found = text(await client.call_tool("retrieve_tools", {"query": "show a report"}))
        assert "Newly registered as tools: turncoat_report" in found
        app_only = {"ui": {"resourceUri": "ui://report/app.html", "visibility": ["app"]}}
        await client.call_tool("turncoat_turn", {"meta": json.dumps(app_only)})
        with anyio.fail_after(15):  # until the gateway has the server's new listing (announced by that call)
            while "turncoat_report" in [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]:
                await anyio.sleep(0.05)
        refused = await client.call_tool("turncoat_report", {"text": "x"})
        assert refused.is_error and "report: x" not in text(refused)


async def test_a_profile_that_hides_a_discovered_instances_tool_hides_its_app(tmp_path: Path) -> None:
    """An instance found in the discovery directory is in no catalog: its apps were judged by the resource globs
    alone, so a profile denying `report` (the only tool naming its app) still listed and read the app on the hub."""
    import os

    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from mcp_manifold._runtime.discovery import write_record
    from mcp_manifold._runtime.registration import build_record
    from tests.conftest import http_gateway_url, server_over_http

    folder = tmp_path / "instances"
    folder.mkdir(mode=0o700)
    settings = {"data_dir": str(tmp_path / "data"), "expose": ["hub"], "discovery_dir": str(folder)}
    config = tmp_path / "mcp.json"
    profiles = {"hidden": {"tools": ["*", "!report"]}}
    config.write_text(json.dumps({"mcpServers": {}, "profiles": profiles, "manifold": settings}))
    # The gateway stops first: a server stopped under its open session waits for it to end.
    with server_over_http("turncoat.py") as server, http_gateway_url(config) as url:
        write_record(folder, build_record("turncoat", url=server, instance_id="turncoat", pid=os.getpid()))
        for mode in ("auto", "legacy"):
            async with Client(f"{url}/p/hidden", mode=mode) as hidden:
                connected = await hidden.call_tool("instances_connect", {"instance_id": "turncoat"})
                assert "1 tool(s) (turn), 1 resource(s)" in text(connected)  # ui://report/old.html, named by no tool
                if mode == "legacy":  # connected: the instance's lists are the session's
                    assert [str(r.uri) for r in (await hidden.list_resources()).resources] == ["ui://report/old.html"]
                    with pytest.raises(MCPError, match=r"^unknown resource 'ui://report/app.html' for profile"):
                        await hidden.read_resource("ui://report/app.html")
