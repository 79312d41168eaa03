"""Config reload: a running gateway takes an edited config without dropping its clients.

The rules run against a real gateway in this process (real fixture servers, the SDK's client over the
gateway's own MCP server in memory): which servers keep their process, restart, stop or start, which
settings change at once, and a bad edit refused while the old config keeps serving. Then the real
thing: `manifold serve --http` as a subprocess, its config file edited on disk and SIGHUP sent, one
client session open throughout.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from prometheus_client import generate_latest

from mcp_manifold._config import LIVE_SETTINGS, load_config, parse_config_data
from mcp_manifold._config.changes import diff_configs
from mcp_manifold._files import pid_is_alive
from mcp_manifold._front.http import build_app
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.listing_cache import ListingCache
from mcp_manifold._runtime.metrics import GatewayMetrics
from tests.conftest import free_port, server_entry, stop_process, wait_for_port

pytestmark = pytest.mark.anyio


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def write(path: Path, servers: dict[str, Any], **settings: Any) -> Path:
    manifold = {"data_dir": str(path.parent / "data"), "ping_interval": 0, **settings}
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold}, indent=2))
    return path


# --- what a reload changes (no processes) ---------------------------------------------------------------


def parse(servers: dict[str, Any], **settings: Any) -> Any:
    return parse_config_data({"mcpServers": servers, "manifold": settings}, source="mcp.json", env={})


def test_only_a_change_of_what_a_server_is_restarts_it() -> None:
    one = {"command": "one"}
    before = parse({"same": one, "gone": one, "moved": one, "renamed": one, "off": one}, call_timeout=5, port=1)
    after = parse(
        {
            "same": one,
            "moved": {"command": "one", "args": ["--other"]},
            "renamed": {"command": "one", "prefix": "r", "timeout": 3},
            "off": {"command": "one", "enabled": False},
            "new": one,
        },
        call_timeout=9,
        port=2,
    )
    changes = diff_configs(before, after)
    assert changes.added == ("new",)
    assert changes.removed == ("gone",)
    assert changes.restarted == ("moved", "off")
    assert changes.reconfigured == ("renamed",)
    assert changes.settings == (("call_timeout", 5.0, 9.0),)
    assert changes.needs_restart == (("port", 1, 2),)
    assert diff_configs(before, before).empty


def test_a_change_of_who_may_connect_or_see_what_is_named() -> None:
    servers = {"one": {"command": "one"}}
    before = parse_config_data({"mcpServers": servers}, source="mcp.json", env={})
    after = parse_config_data(
        {
            "mcpServers": servers,
            "auth": {"api_keys": {"ci": "a-key-of-sixteen-or-more"}},
            "profiles": {"ci": {"principals": ["ci"], "servers": ["one"]}},
        },
        source="mcp.json",
        env={},
    )
    changes = diff_configs(before, after)
    assert changes.sections == ("profiles",) and changes.sections_need_restart == ("auth",)  # switched on
    assert changes.summary() == "sections profiles" and not changes.empty
    assert diff_configs(after, after).empty

    def with_auth(auth: dict[str, Any]) -> Any:
        return parse_config_data({"mcpServers": servers, "auth": auth}, source="mcp.json", env={})

    keys = {"api_keys": {"ci": "a-key-of-sixteen-or-more"}}
    oauth = {"issuer": "https://issuer.example", "jwks_url": "https://issuer.example/jwks", "audience": "gw"}
    live = diff_configs(after, with_auth({"api_keys": {"ci": "another-key-of-sixteen"}, "operators": ["ci"]}))
    assert live.sections == ("profiles", "auth") and not live.sections_need_restart  # keys, operators: at once
    moved = diff_configs(with_auth({**keys, "oauth": oauth}), with_auth({**keys, "oauth": {**oauth, "audience": "x"}}))
    assert moved.sections == ("auth",) and not moved.sections_need_restart  # what tokens must hold: at once
    advertised = {**oauth, "issuer": "https://elsewhere.example"}
    other = diff_configs(with_auth({**keys, "oauth": oauth}), with_auth({**keys, "oauth": advertised}))
    assert other.sections == () and other.sections_need_restart == ("auth",)  # the metadata the front serves


def test_the_docs_name_exactly_the_live_settings() -> None:
    docs = Path(__file__).parent.parent / "docs"
    for page, opening in (("config.md", "Settings that a config reload changes"), ("operations.md", "Live settings:")):
        text = (docs / page).read_text()
        paragraph = text[text.index(opening) :].split("\n\n")[0]
        named = set(re.findall(r"`([a-z_]+)`", paragraph))
        assert named == LIVE_SETTINGS, (page, named ^ LIVE_SETTINGS)


# --- the rules, on a real gateway ---------------------------------------------------------------------


class Watcher:
    """A client's view of the gateway: the list_changed notices it got."""

    def __init__(self) -> None:
        self.tool_notices = 0

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tool_notices += 1


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools}


async def until(check: Any, timeout: float = 20) -> Any:
    with anyio.fail_after(timeout):
        while not (found := await check()):
            await anyio.sleep(0.05)
    return found


async def read_refused(client: Client, uri: str, words: str) -> bool:
    """Whether reading `uri` is refused now, saying `words` (what a reload that applied makes of it)."""
    try:
        await client.read_resource(uri)
    except MCPError as exc:
        assert words in str(exc)
        return True
    return False


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Gateway, Client, Watcher, Path]]:
    path = write(
        tmp_path / "mcp.json",
        {
            "numbers": server_entry("numbers.py"),
            "words": server_entry("words.py"),
            "kitchen": server_entry("kitchen.py"),
            "catalog": server_entry("catalog.py", "--count", "2"),
        },
        reload=False,  # reloads are asked for here; the file watcher has its own test
    )
    watcher = Watcher()
    async with (
        Gateway(load_config(path), serving=True) as gateway,
        Client(McpFront(gateway).server, mode="legacy", message_handler=watcher.on_message) as client,
    ):
        yield gateway, client, watcher, path


async def test_a_reload_starts_stops_and_restarts_only_what_changed(
    served: tuple[Gateway, Client, Watcher, Path],
) -> None:
    gateway, client, watcher, path = served
    before = await tool_names(client)
    assert {"numbers_add", "words_upper", "kitchen_echo", "catalog_tool_0002"} <= before
    assert gateway.reloader is not None
    pids = {name: gateway.pool[name].pid for name in ("numbers", "words", "kitchen", "catalog")}
    unchanged = gateway.pool["numbers"]
    notices = watcher.tool_notices

    write(
        path,
        {
            "numbers": server_entry("numbers.py"),  # unchanged
            "kitchen": server_entry("kitchen.py", prefix="k", timeout=7),  # same server, new options
            "catalog": server_entry("catalog.py", "--count", "3"),  # another command line: restarts
            "clock": server_entry("clock.py"),  # new
        },  # words: removed
        reload=False,
        call_timeout=42,  # changes live
        port=9,  # cannot change live
    )
    # A 2026-07-28 client has no session to be told in: it hears on its listen stream.
    async with (
        Client(McpFront(gateway).server, mode="auto") as modern,
        modern.listen(tools_list_changed=True) as stream,
    ):
        outcome = await gateway.reloader.reload()
        with anyio.fail_after(20):
            event = await stream.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
    assert outcome.applied, outcome.problems
    assert outcome.changes.needs_restart == (("port", 8765, 9),)

    expected = {"numbers_add", "k_echo", "catalog_tool_0003", "clock_get_current_time"}
    names = await until(lambda: _names_once(client, expected))
    assert not {"words_upper", "kitchen_echo"} & names
    assert watcher.tool_notices > notices  # the client was told, on the same session
    assert text_of(await client.call_tool("k_echo", {"text": "same session"})) == "same session"
    assert text_of(await client.call_tool("numbers_add", {"a": 2, "b": 3})).startswith("5")

    assert gateway.pool["numbers"] is unchanged and unchanged.pid == pids["numbers"]
    assert gateway.pool["kitchen"].pid == pids["kitchen"]  # kept its process
    assert gateway.pool["kitchen"].call_timeout == 7
    assert gateway.pool["catalog"].pid not in (None, pids["catalog"])
    assert "words" not in gateway.pool.backends
    await until(lambda: _gone(pids["words"], pids["catalog"]))
    assert gateway.settings.call_timeout == 42 and gateway.settings.port == 8765

    # Until a changed server has listed itself again, 2026-07-28 clients are told their lists go stale now.
    await until(lambda: _settled(gateway))
    data = json.loads(path.read_text())
    data["mcpServers"]["kitchen"]["prefix"] = "kk"
    path.write_text(json.dumps(data))
    assert (await gateway.reloader.reload()).changes.reconfigured == ("kitchen",)
    assert not gateway.sync.settled()
    await until(lambda: _names_once(client, {"kk_echo"}))
    await until(lambda: _settled(gateway))


async def _settled(gateway: Gateway) -> bool:
    return gateway.sync.settled()


async def _names_once(client: Client, expected: set[str]) -> set[str] | None:
    names = await tool_names(client)
    return names if expected <= names else None


async def _gone(*pids: int | None) -> bool:
    return not any(pid is not None and pid_is_alive(pid) for pid in pids)


async def test_a_bad_edit_is_refused_and_the_old_config_keeps_serving(
    served: tuple[Gateway, Client, Watcher, Path], caplog: pytest.LogCaptureFixture
) -> None:
    gateway, client, _watcher, path = served
    await tool_names(client)
    pid = gateway.pool["numbers"].pid
    good = path.read_text()
    data = json.loads(good)
    data["mcpServers"]["numbers"]["timeout"] = "soon"
    data["mcpServers"].pop("words")
    path.write_text(json.dumps(data))
    assert gateway.reloader is not None
    with caplog.at_level(logging.ERROR, logger="mcp_manifold"):
        outcome = await gateway.reloader.reload()
    assert not outcome.applied
    assert any("numbers" in problem and "timeout" in problem for problem in outcome.problems), outcome.problems
    refusal = [record.getMessage() for record in caplog.records if "reload refused" in record.getMessage()]
    assert refusal and "timeout" in refusal[0] and str(path) in refusal[0]
    # Nothing changed: words still serves, numbers kept its process.
    assert text_of(await client.call_tool("words_upper", {"text": "still"})) == "STILL"
    assert gateway.pool["numbers"].pid == pid

    path.write_text("{ not json")
    assert not (await gateway.reloader.reload()).applied
    assert "words_upper" in await tool_names(client)


async def test_the_file_watcher_applies_an_edit(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"numbers": server_entry("numbers.py")}, lazy=False)
    async with Gateway(load_config(path), serving=True) as gateway:
        assert gateway.reloader is not None and gateway.reloader.watch
        edited = {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}
        write(tmp_path / "mcp.json", edited, lazy=False)  # eager, as before: words starts at once
        await until(lambda: _listed(gateway, "words_upper"))
        assert gateway.reloader.last is not None and gateway.reloader.last.trigger == "file"


async def _listed(gateway: Gateway, name: str) -> bool:
    return gateway.catalog.has_tool(name)


async def test_a_server_a_reload_removes_takes_its_metric_series_and_what_it_served_with_it(tmp_path: Path) -> None:
    """Each server a reload removed kept its series (44 lines of histograms), its label among `SERVER_LABELS`,
    what it served in the pin store and its cached listing: 150 reloads each swapping one server for a new one
    took /metrics from 130 lines to 4,630 and left 150 listing files, and past 100 removed servers every server
    added counted as `_other`."""
    servers = {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}
    path = write(tmp_path / "mcp.json", servers, reload=False, pinning="warn")
    async with (
        Gateway(load_config(path), serving=True) as gateway,
        Client(McpFront(gateway).server, mode="legacy") as client,
    ):
        metrics = GatewayMetrics(gateway)
        metrics.attach()
        assert text_of(await client.call_tool("words_upper", {"text": "soak"})) == "SOAK"
        assert 'server="words"' in generate_latest(metrics.registry).decode()
        assert any(server == "words" for server, _tool in gateway.pins._served)
        words, cache = gateway.config.servers["words"], ListingCache(tmp_path / "data" / "listings")
        assert cache.load(words) is not None

        write(path, {"numbers": server_entry("numbers.py")}, reload=False, pinning="warn")
        assert gateway.reloader is not None
        assert (await gateway.reloader.reload()).changes.removed == ("words",)
        assert 'server="words"' not in generate_latest(metrics.registry).decode()
        assert not any(server == "words" for server, _tool in gateway.pins._served)  # what it serves: nothing
        assert gateway.pins.get("words", "upper") is not None  # its pins stay: an approval outlives a removal
        assert cache.load(words) is None  # and its listing for a warm start goes (one file per server removed)


async def test_a_reload_warns_of_a_new_mistake_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A reload bringing a mistake that `serve` warns of at start (a profile naming no configured server)
    logs it, as the start would have said it; a reload that changes something else does not say it again."""
    servers = {"numbers": server_entry("numbers.py")}
    path = write(tmp_path / "mcp.json", servers, reload=False)
    async with Gateway(load_config(path), serving=True) as gateway:
        assert gateway.reloader is not None
        data = json.loads(path.read_text())
        data["profiles"] = {"team": {"servers": ["numbrs"]}}
        path.write_text(json.dumps(data))
        with caplog.at_level(logging.WARNING, logger="mcp_manifold"):
            assert (await gateway.reloader.reload()).applied
            data["manifold"]["tools_limit"] = 7
            path.write_text(json.dumps(data))
            assert (await gateway.reloader.reload()).applied
        warned = [record.getMessage() for record in caplog.records if "numbrs" in record.getMessage()]
        assert warned == [
            f"config reload: {path}: profile 'team', field 'servers': 'numbrs' matches no configured server;"
            " did you mean 'numbers'?"
        ], warned


async def test_a_reload_applies_keys_and_profiles_and_keeps_authentication_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Profiles and keys are read at each request: an edit applies at once, so a removed (leaked) API key is
    refused from the next request on, without a restart that would drop every client. Switching
    authentication off, or adding OAuth, needs a restart and is said so; the keys of the edit apply at
    once even then: before, the running ones stayed whole, and a key taken out (the only one, or in the
    same edit as OAuth) went on working until a restart."""
    first, second, third = "the-first-operator-key", "the-second-operator-key", "the-third-operator-key"
    path = tmp_path / "mcp.json"
    (tmp_path / "jwks.json").write_text('{"keys": []}')
    oauth = {"issuer": "http://127.0.0.1/issuer", "jwks_file": str(tmp_path / "jwks.json"), "audience": ["gw"]}

    def save(key: str | None, **sections: Any) -> None:
        write(path, {"numbers": server_entry("numbers.py")}, reload=False)
        data = json.loads(path.read_text())
        if key is not None:
            data |= {"auth": {"api_keys": {"operator": key}, "operators": ["operator"]}}
        path.write_text(json.dumps(data | sections))

    save(first)
    async with Gateway(load_config(path), serving=True) as gateway, AsyncExitStack() as stack:
        assert gateway.reloader is not None
        app = build_app(gateway, "127.0.0.1", stack)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765") as http:

            async def status(key: str | None) -> int:
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                return (await http.get("/metrics", headers=headers)).status_code

            assert (await status(None), await status(first)) == (401, 200)
            readonly = {"readonly": {"principals": ["operator"], "servers": ["numbers"]}}
            save(first, profiles=readonly)  # a profile added: applies at once
            outcome = await gateway.reloader.reload()
            assert outcome.applied and outcome.changes.sections == ("profiles",)
            assert set(gateway.config.profiles) == {"readonly"}
            assert (await status(None), await status(first)) == (401, 200)

            save(second, profiles=readonly)  # the key replaced: the old one is refused at once
            outcome = await gateway.reloader.reload()
            assert outcome.applied and outcome.changes.sections == ("auth",), outcome.changes
            assert not outcome.changes.sections_need_restart
            assert (await status(first), await status(second)) == (401, 200)

            # The key replaced in the edit that adds OAuth (metadata the front would serve: a restart).
            save(
                None,
                profiles=readonly,
                auth={"api_keys": {"operator": third}, "operators": ["operator"], "oauth": oauth},
            )
            with caplog.at_level(logging.WARNING, logger="mcp_manifold"):
                outcome = await gateway.reloader.reload()
            assert outcome.applied and outcome.changes.sections_need_restart == ("auth",)
            assert "auth" in outcome.as_dict()["changes"]["needs_restart"]
            assert any("its api_keys, operators and revoked apply now" in r.message for r in caplog.records)
            assert gateway.config.auth.oauth is None  # the OAuth settings wait for the restart
            # Before: (401, 200, 401), the removed key working and the new one refused.
            assert (await status(None), await status(second), await status(third)) == (401, 401, 200)

            save(None, profiles=readonly)  # no auth at all: only a restart may open the gateway
            outcome = await gateway.reloader.reload()
            assert outcome.applied and outcome.changes.sections_need_restart == ("auth",)
            # Until then its front checks every request, and no key is left: the last one is revoked too.
            assert (await status(None), await status(third)) == (401, 401)  # was (401, 200)
            assert set(gateway.config.profiles) == {"readonly"}


# --- the real thing: a shared HTTP gateway, SIGHUP, and stdio's hang-up -----------------------------------


async def test_sighup_reloads_a_shared_gateway_without_dropping_its_client(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"numbers": server_entry("numbers.py")})
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
    process = subprocess.Popen([*command, "--no-reload"], start_new_session=True, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, process)
        watcher = Watcher()
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy", message_handler=watcher.on_message) as client:
            assert "numbers_add" in await tool_names(client)
            write(path, {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")})
            os.kill(process.pid, signal.SIGHUP)
            await until(lambda: _names_once(client, {"numbers_add", "words_upper"}))
            assert watcher.tool_notices >= 1
            assert text_of(await client.call_tool("words_upper", {"text": "hup"})) == "HUP"
        assert process.poll() is None  # SIGHUP reloaded; it did not stop the gateway
    finally:
        stop_process(process)


class Heard:
    """What a client's session heard unasked: the resources said to be updated."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.got: dict[str, anyio.Event] = {}

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(message.params.uri)
            self.got.setdefault(message.params.uri, anyio.Event()).set()

    async def wait(self, uri: str) -> None:
        with anyio.fail_after(20):
            await self.got.setdefault(uri, anyio.Event()).wait()


@pytest.mark.session_era("resources/subscribe")
async def test_a_reload_that_takes_a_resource_away_ends_its_updates_to_open_sessions(tmp_path: Path) -> None:
    """A session keeps the profile it was opened with, and its subscriptions with it. After a reload, alice
    (moved to another profile) and dave (his profile no longer lets him read `text`) had their requests
    refused, yet kept hearing of every update of `text`, and so did erin's 2026-07-28 listen stream (her
    profile is dave's). carol's profile is unchanged: she still does."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp_manifold._config.security import hash_key

    keys = {name: f"{name}-key-0123456789abcdef" for name in ("alice", "bob", "carol", "dave", "erin")}
    text, blob = "kitchen+kitchen://text", "kitchen+kitchen://blob"
    path = tmp_path / "mcp.json"

    def save(profiles: dict[str, Any]) -> None:
        write(path, {"kitchen": server_entry("kitchen.py")}, reload=False, lazy=False)
        data = json.loads(path.read_text())
        api_keys = {name: {"sha256": hash_key(key)} for name, key in keys.items()}
        path.write_text(json.dumps(data | {"auth": {"api_keys": api_keys}, "profiles": profiles}))

    save(
        {
            "dev": {"principals": ["alice", "carol"]},
            "readers": {"principals": ["dave", "erin"]},
            "ops": {"principals": ["bob"]},
        }
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
    process = subprocess.Popen(command, start_new_session=True)
    heard = {name: Heard() for name in ("alice", "carol", "dave")}
    try:
        wait_for_port(port, process)
        async with AsyncExitStack() as stack:
            clients = {}
            for name, key in keys.items():
                http = await stack.enter_async_context(
                    create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
                )
                handler = heard[name].on_message if name in heard else None
                transport = streamable_http_client(url, http_client=http)
                mode = "auto" if name == "erin" else "legacy"  # erin: 2026-07-28
                clients[name] = await stack.enter_async_context(Client(transport, mode=mode, message_handler=handler))
            for name in heard:
                await clients[name].subscribe_resource(text)
            await clients["dave"].subscribe_resource(blob)
            stream = await stack.enter_async_context(clients["erin"].listen(resource_subscriptions=[text, blob]))
            assert stream.honored.resource_subscriptions == [text, blob]

            save(
                {
                    "maths": {"principals": ["alice"], "servers": []},
                    "dev": {"principals": ["carol"]},
                    "readers": {"principals": ["dave", "erin"], "resources": [blob]},
                    "ops": {"principals": ["bob"]},
                }
            )
            os.kill(process.pid, signal.SIGHUP)

            # The reload applies whole at once: then it has.
            await until(lambda: read_refused(clients["alice"], text, "this session was opened with profile 'dev'"))
            await clients["bob"].call_tool("kitchen_touch", {"uri": "kitchen://text"})
            await clients["bob"].call_tool("kitchen_touch", {"uri": "kitchen://blob"})
            await heard["carol"].wait(text)
            await heard["dave"].wait(blob)  # sent on the same stream after `text`'s, had that been sent
            assert heard["dave"].updated == [blob]  # was [text, blob]
            assert heard["alice"].updated == []  # was [text]
            with anyio.fail_after(20):
                events = [await stream.__anext__()]
                while getattr(events[-1], "uri", None) != blob:  # after `text`'s, had that been sent
                    events.append(await stream.__anext__())
            assert [getattr(event, "uri", None) for event in events] == [blob]  # was [text, blob]
            with pytest.raises(MCPError, match="unknown resource"):
                await clients["dave"].read_resource(text)
    finally:
        stop_process(process)


def test_sighup_still_stops_a_stdio_gateway(tmp_path: Path) -> None:
    """Over stdio a hang-up means the client or terminal is gone: the gateway stops, cleanly."""
    path = write(tmp_path / "mcp.json", {"numbers": server_entry("numbers.py")})
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--log-level", "info"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(command, **pipes, start_new_session=True)
    try:
        live = tmp_path / "data" / "live"
        anyio.run(_wait_for_files, live)
        process.send_signal(signal.SIGHUP)
        assert process.wait(timeout=20) == 0
    finally:
        stop_process(process)


async def _wait_for_files(folder: Path) -> None:
    await until(lambda: _any_file(folder))


async def _any_file(folder: Path) -> bool:
    return any(folder.glob("*.json"))


# --- a server the reload removed is never listed again (its late announcement, its cached re-listing) ----


def _serve_logged(path: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`manifold serve --http` on `path`, its log (debug) in the file `log`: the process and its /mcp URL."""
    port = free_port()
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
    with log.open("ab") as stream:
        process = subprocess.Popen(
            [*command, "--no-reload", "--log-level", "debug"], start_new_session=True, stderr=stream
        )
    wait_for_port(port, process)
    return process, f"http://127.0.0.1:{port}/mcp"


async def _logged_or_exited(process: subprocess.Popen[bytes], log: Path, line: str) -> None:
    await until(lambda: _said_or_gone(process, log, line))


async def _said_or_gone(process: subprocess.Popen[bytes], log: Path, line: str) -> bool:
    return process.poll() is not None or line in log.read_text(errors="replace")


async def test_a_listen_stream_hears_nothing_of_a_resource_it_could_not_subscribe_once_its_profile_narrows(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 listen stream that names a resource whose subscription failed (here: a URI past the
    subscription bound) kept it, judged by nothing: after a reload took every resource but `blob` from
    erin's profile, she still heard of its updates, which her server sends whoever subscribed."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp_manifold._config.security import hash_key

    keys = {name: f"{name}-key-0123456789abcdef" for name in ("bob", "erin")}
    text, blob = "kitchen+kitchen://text", "kitchen+kitchen://blob"
    long = "kitchen+kitchen://greeting/" + "x" * 5000  # refused by the subscription bound, not unknown
    path = tmp_path / "mcp.json"

    def save(resources: list[str]) -> None:
        # The handshake: this kitchen tells of every resource it touches, subscribed or not.
        write(path, {"kitchen": server_entry("kitchen.py", protocol="legacy")}, reload=False, lazy=False)
        data = json.loads(path.read_text())
        api_keys = {name: {"sha256": hash_key(key)} for name, key in keys.items()}
        profiles = {"readers": {"principals": ["erin"], "resources": resources}, "ops": {"principals": ["bob"]}}
        path.write_text(json.dumps(data | {"auth": {"api_keys": api_keys}, "profiles": profiles}))

    save(["kitchen+*"])
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
    process = subprocess.Popen(command, start_new_session=True)
    try:
        wait_for_port(port, process)
        async with AsyncExitStack() as stack:
            clients = {}
            for name in keys:
                http = await stack.enter_async_context(
                    create_mcp_http_client(headers={"Authorization": f"Bearer {keys[name]}"})
                )
                transport = streamable_http_client(url, http_client=http)
                clients[name] = await stack.enter_async_context(Client(transport, mode="auto"))
            stream = await stack.enter_async_context(clients["erin"].listen(resource_subscriptions=[long, blob]))
            save([blob])
            os.kill(process.pid, signal.SIGHUP)

            await until(lambda: read_refused(clients["erin"], text, "unknown resource"))  # the reload has applied
            await clients["bob"].call_tool("kitchen_touch", {"uri": long.removeprefix("kitchen+")})
            await clients["bob"].call_tool("kitchen_touch", {"uri": "kitchen://blob"})
            with anyio.fail_after(20):
                events = [await stream.__anext__()]
                while getattr(events[-1], "uri", None) != blob:  # after `long`'s, had that been sent
                    events.append(await stream.__anext__())
            assert [getattr(event, "uri", None) for event in events] == [blob]  # was [long, blob]
    finally:
        stop_process(process)


async def test_a_removed_server_announcing_while_its_call_drains_ends_nothing(tmp_path: Path) -> None:
    """Its announcement once the reload removed it is ignored; before, listing it again raised KeyError in the
    back channel's task group, and the whole gateway exited."""
    servers = {"numbers": server_entry("numbers.py"), "ann": server_entry("announcer.py")}
    path = write(tmp_path / "mcp.json", servers, shutdown_timeout=10)
    log = tmp_path / "gateway.log"
    process, url = _serve_logged(path, log)
    try:
        async with Client(url, mode="legacy") as client:
            assert "ann_slow_announce" in await tool_names(client)
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "ann_slow_announce", {"seconds": 2})
                await anyio.sleep(0.5)
                write(path, {"numbers": servers["numbers"]}, shutdown_timeout=10)
                os.kill(process.pid, signal.SIGHUP)
            await _logged_or_exited(process, log, "announced a change after a config reload retired it: ignored")
            assert process.poll() is None, log.read_text()
            assert text_of(await client.call_tool("numbers_add", {"a": 2, "b": 3})) == "5.0"
        assert "Traceback" not in log.read_text()
    finally:
        stop_process(process)


async def test_a_removed_server_whose_cached_listing_awaits_refresh_ends_nothing(tmp_path: Path) -> None:
    """A restart answers from the listing cache and re-lists each server a moment later; a reload removing one
    meanwhile made that re-listing raise KeyError in the gateway's task group (the gateway exited)."""
    servers = {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}
    path = write(tmp_path / "mcp.json", servers)
    log = tmp_path / "gateway.log"
    process, url = _serve_logged(path, log)  # the first run fills the listing cache
    try:
        async with Client(url, mode="legacy") as client:
            assert "words_upper" in await tool_names(client)
    finally:
        stop_process(process)
    process, url = _serve_logged(path, log)
    try:
        async with Client(url, mode="legacy") as client:
            assert "words_upper" in await tool_names(client)  # from the cache; re-listed in a second
            write(path, {"numbers": servers["numbers"]})
            os.kill(process.pid, signal.SIGHUP)
            await _logged_or_exited(process, log, "server 'words': not listed: a config reload removed it")
            assert process.poll() is None, log.read_text()
            assert await tool_names(client) == {"numbers_add", "numbers_multiply", "numbers_sqrt"}
        assert "Traceback" not in log.read_text()
    finally:
        stop_process(process)


async def test_a_config_file_turned_into_a_symlink_loop_ends_nothing(tmp_path: Path) -> None:
    """The live status resolved the config path every 2 s; a loop made of it (a dotfile manager linking two
    copies at each other) raised RuntimeError there, in the gateway's task group: the gateway exited."""
    path = write(tmp_path / "mcp.json", {"numbers": server_entry("numbers.py")})
    log = tmp_path / "gateway.log"
    process, url = _serve_logged(path, log)
    try:
        live = tmp_path / "data" / "live" / f"{process.pid}.json"
        await until(lambda: _live_written_after(live, 0))
        (tmp_path / "other.json").symlink_to(path)
        (tmp_path / "mcp.json.new").symlink_to(tmp_path / "other.json")
        (tmp_path / "mcp.json.new").replace(path)  # mcp.json -> other.json -> mcp.json
        os.kill(process.pid, signal.SIGHUP)  # the reload is refused, the old config serves on
        since = time.time()
        await until(lambda: _live_written_after(live, since, process))
        assert process.poll() is None, log.read_text()
        assert json.loads(live.read_text())["config"] == str(tmp_path.resolve() / "mcp.json")  # as it was at start
        async with Client(url, mode="legacy") as client:
            assert text_of(await client.call_tool("numbers_add", {"a": 1, "b": 1})) == "2.0"
        assert "Traceback" not in log.read_text()
    finally:
        stop_process(process)


async def _live_written_after(live: Path, since: float, process: subprocess.Popen[bytes] | None = None) -> bool:
    """Whether the live status was written after `since` (or the gateway is gone)."""
    if process is not None and process.poll() is not None:
        return True
    try:
        return float(json.loads(live.read_text())["written_at"]) > since
    except (OSError, ValueError, KeyError):
        return False


@pytest.mark.session_era("resources/subscribe")
async def test_a_reload_that_removes_an_api_key_ends_the_streams_it_opened(tmp_path: Path) -> None:
    """Revoking a leaked key is taking it out of the config and reloading. Its requests were refused from then
    on, but the streams it had opened kept carrying updates: a session's GET stream, a 2026-07-28 listen
    stream. Both now end before anything more is sent on them; bob's key, still configured, hears on. So does
    a stream whose key a reload gave to another principal (erin's, now "erin-ops"): it would act on as erin."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp_manifold._config.security import hash_key

    keys = {name: f"{name}-key-0123456789abcdef" for name in ("alice", "bob", "erin")}
    text = "kitchen+kitchen://text"
    path = tmp_path / "mcp.json"

    def save(names: dict[str, str]) -> None:  # principal -> whose key
        write(path, {"kitchen": server_entry("kitchen.py")}, reload=False, lazy=False)
        data = json.loads(path.read_text())
        api_keys = {principal: {"sha256": hash_key(keys[owner])} for principal, owner in names.items()}
        path.write_text(json.dumps(data | {"auth": {"api_keys": api_keys}}))

    save({"alice": "alice", "bob": "bob", "erin": "erin"})
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
    process = subprocess.Popen(command, start_new_session=True)
    alice = {"Authorization": f"Bearer {keys['alice']}", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    bob_heard = Heard()
    try:
        wait_for_port(port, process)
        async with AsyncExitStack() as stack:
            clients = {}
            for name, mode in (("bob", "legacy"), ("erin", "auto")):
                http = await stack.enter_async_context(
                    create_mcp_http_client(headers={"Authorization": f"Bearer {keys[name]}"})
                )
                handler = bob_heard.on_message if name == "bob" else None
                transport = streamable_http_client(url, http_client=http)
                clients[name] = await stack.enter_async_context(Client(transport, mode=mode, message_handler=handler))
            erins = await stack.enter_async_context(clients["erin"].listen(resource_subscriptions=[text]))
            await clients["bob"].subscribe_resource(text)
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
            opened = await http.post(url, json=initialize, headers=alice)
            alice |= {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=alice)
            subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": text}}
            assert (await http.post(url, json=subscribe, headers=alice)).status_code == 200
            async with http.stream("GET", url, headers=alice) as alices:
                assert alices.status_code == 200
                save({"bob": "bob", "erin-ops": "erin"})
                os.kill(process.pid, signal.SIGHUP)

                async def refused() -> bool:
                    return (await http.post(url, json=subscribe, headers=alice)).status_code == 401

                await until(refused)
                await clients["bob"].call_tool("kitchen_touch", {"uri": "kitchen://text"})
                await bob_heard.wait(text)  # the update was sent
                with anyio.fail_after(20):
                    heard = b"".join([chunk async for chunk in alices.aiter_bytes()])  # it ends
                    erin_heard = [event async for event in erins]  # it ends, gracefully
            assert b"resources/updated" not in heard and erin_heard == []
    finally:
        stop_process(process)


async def test_a_reload_that_revokes_a_token_refuses_it_and_ends_its_streams(tmp_path: Path) -> None:
    """A JWT is good until its `exp`, and removing nothing from the config stopped a leaked one: the issuer's
    keys had to change for everyone. `auth.revoked` names tokens refused from the next request on: each of a
    principal's (`oauth:dave`) or one by its `jti`. A stream one opened ends; another token of the same
    principal, not named, goes on, and so does a session the revoked token opened, carried on with that one:
    its code-mode calls were refused (its caller kept the revoked token's claims)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.test_security import Issuer

    issuer, port = Issuer(), free_port()
    url, path = f"http://127.0.0.1:{port}/mcp", tmp_path / "mcp.json"
    tokens = {
        "dave": issuer.token(url, sub="dave"),
        "erin-1": issuer.token(url, sub="erin", jti="t-1"),
        "erin-2": issuer.token(url, sub="erin", jti="t-2"),
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }

    async def post(http: httpx.AsyncClient, token: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        return await http.post(url, json=initialize, headers=headers)

    with issuer.serve() as jwks_url:

        def save(revoked: list[str]) -> None:
            write(path, {"kitchen": server_entry("kitchen.py")}, reload=False, lazy=False, expose=["direct", "code"])
            oauth = {"issuer": issuer.url, "jwks_url": jwks_url, "resource_url": url}
            path.write_text(json.dumps(json.loads(path.read_text()) | {"auth": {"oauth": oauth, "revoked": revoked}}))

        save([])
        command = [sys.executable, "-m", "mcp_manifold", "serve", "--config", str(path), "--http", "--port", str(port)]
        process = subprocess.Popen(command, start_new_session=True)
        try:
            wait_for_port(port, process)
            async with AsyncExitStack() as stack:
                clients, https = {}, {}
                for name, mode in (("dave", "auto"), ("erin-2", "legacy"), ("erin-1", "legacy")):
                    https[name] = await stack.enter_async_context(
                        create_mcp_http_client(headers={"Authorization": f"Bearer {tokens[name]}"})
                    )
                    transport = streamable_http_client(url, http_client=https[name])
                    clients[name] = await stack.enter_async_context(Client(transport, mode=mode))
                daves = await stack.enter_async_context(clients["dave"].listen(tools_list_changed=True))
                http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
                assert [(await post(http, token)).status_code for token in tokens.values()] == [200, 200, 200]

                save(["oauth:dave", "jti:t-1"])
                os.kill(process.pid, signal.SIGHUP)

                async def refused() -> bool:
                    return (await post(http, tokens["dave"])).status_code == 401

                await until(refused)
                for name in ("dave", "erin-1"):
                    answer = await post(http, tokens[name])
                    assert answer.status_code == 401, (name, answer.text)
                    assert answer.json()["error_description"] == "the token was revoked (auth.revoked)", answer.text
                assert (await post(http, tokens["erin-2"])).status_code == 200
                echoed = await clients["erin-2"].call_tool("kitchen_echo", {"text": "on"})
                assert [block.text for block in echoed.content] == ["on"]  # type: ignore[union-attr]
                https["erin-1"].headers["Authorization"] = f"Bearer {tokens['erin-2']}"  # its client's fresh token
                program = {"code": "return await tools.kitchen_echo({text: 'still'})"}
                ran = await clients["erin-1"].call_tool("execute_code", program)
                assert not ran.is_error and "still" in text_of(ran), text_of(ran)  # was "no longer holds profile"
                with anyio.fail_after(20):
                    assert [event async for event in daves] == []  # it ends, gracefully
        finally:
            stop_process(process)
