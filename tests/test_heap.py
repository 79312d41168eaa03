"""The collector settings a started gateway takes (`_runtime/heap.py`): a served gateway, over stdio and
over HTTP, reports at exit (through a `sitecustomize` on its path) what its collector was set to."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.client.stdio
import pytest
from mcp import Client

from mcp_manifold._runtime.heap import YOUNG_THRESHOLD
from tests.conftest import SERVERS, free_port, gateway_over_http, server_entry, stdio_gateway

REPORTER = """
import atexit, gc, json, os

_unfrozen = []
_unfreeze = gc.unfreeze

def _counted_unfreeze():
    _unfrozen.append(gc.get_freeze_count())
    _unfreeze()

gc.unfreeze = _counted_unfreeze

def _report():
    with open(os.environ["MANIFOLD_TEST_HEAP_REPORT"], "w") as out:
        json.dump({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(), "unfrozen": _unfrozen}, out)

atexit.register(_report)
"""


@pytest.fixture
def reporting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a gateway started from now on writes its collector's settings when it exits."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(REPORTER)
    report = tmp_path / "heap.json"
    # A stdio gateway reports as it exits, after its client closed its stdin. The SDK's client waits 2 s for
    # that exit before it kills the gateway, which a machine under load can take: the report came out empty.
    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 30.0)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MANIFOLD_TEST_HEAP_REPORT", str(report))
    return report


def assert_settled(report: Path) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(report.read_text())
    assert seen["frozen"] > 10_000  # what the imports and start-up built: tens of thousands of objects
    assert seen["threshold"][0] == YOUNG_THRESHOLD > gc.get_threshold()[0]
    assert seen["threshold"][1:] == list(gc.get_threshold()[1:])  # the older generations keep CPython's settings
    return seen


def serve_kitchen(config: Path, *, http: bool, then: Callable[[Client], Awaitable[None]] | None = None) -> None:
    """Serve `config` (kitchen.py) over HTTP or stdio, call kitchen_echo once through it, then `then(client)`;
    the gateway has exited (and reported) when this returns."""

    async def main(url: str | None) -> None:
        async with Client(url, cache=None) if url is not None else stdio_gateway(config) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content
            if then is not None:
                await then(client)

    if not http:
        anyio.run(main, None)
        return
    port = free_port()
    with gateway_over_http(config, port):
        anyio.run(main, f"http://127.0.0.1:{port}/mcp")


def test_a_stdio_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    serve_kitchen(write_config({"kitchen": server_entry("kitchen.py")}), http=False)
    assert assert_settled(reporting)["unfrozen"] == []


def test_its_switch_leaves_the_collector_as_cpython_sets_it(
    write_config: Any, reporting: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MANIFOLD_GC_FREEZE", "0")
    serve_kitchen(write_config({"kitchen": server_entry("kitchen.py")}), http=False)
    seen = json.loads(reporting.read_text())
    assert (seen["frozen"], seen["threshold"]) == (0, list(gc.get_threshold()))


def test_an_http_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    serve_kitchen(write_config({"kitchen": server_entry("kitchen.py")}), http=True)
    assert_settled(reporting)


def test_a_served_gateway_unfreezes_at_a_reload(write_config: Any, reporting: Path) -> None:
    """The old config and the servers a reload removes may hold cycles: the collector sees them at once."""

    async def reload(client: Client) -> None:
        write_config({"numbers": server_entry("numbers.py")})  # the gateway watches its file: a reload
        with anyio.fail_after(30):
            while "numbers_add" not in {tool.name for tool in (await client.list_tools()).tools}:
                await anyio.sleep(0.1)

    serve_kitchen(write_config({"kitchen": server_entry("kitchen.py")}), http=True, then=reload)
    seen = json.loads(reporting.read_text())
    assert seen["unfrozen"] and seen["unfrozen"][0] > 10_000  # what start-up built, frozen until the reload


REMOVED_SERVER_FREED = """
import gc, json, sys, weakref
from pathlib import Path
import anyio
from mcp import Client
from mcp_manifold._config import load_config
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime import heap
from mcp_manifold._runtime.gateway import Gateway

heap.AFTER_RETIRE, heap._WAKE_EVERY = 0.5, 0.1  # a fresh freeze soon after the reload, for the test
folder, numbers, words = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
seen = {}

def write(servers):
    settings = {"data_dir": str(folder / "data"), "reload": False, "shutdown_timeout": 1}
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers, "manifold": settings}))
    return folder / "mcp.json"

async def main():
    both = {"numbers": {"command": sys.executable, "args": [numbers]}}
    both["words"] = {"command": sys.executable, "args": [words]}
    async with anyio.create_task_group() as serving:
        async with Gateway(load_config(write(both)), serving=True) as gateway:
            async with Client(McpFront(gateway).server, mode="legacy") as client:
                await client.call_tool("words_upper", {"text": "x"})
                removed = weakref.ref(gateway.pool["words"])
                heap.settle_after_start(serving)  # as `manifold serve` does once started
                seen["frozen at start"] = gc.get_freeze_count()
                write({"numbers": both["numbers"]})
                assert (await gateway.reloader.reload()).applied
                seen["frozen after the reload"] = gc.get_freeze_count()
                with anyio.fail_after(30):
                    while removed() is not None or gc.get_freeze_count() == 0:
                        await anyio.sleep(0.1)
                seen["frozen again"] = gc.get_freeze_count()
        serving.cancel_scope.cancel()
    print(json.dumps(seen))

anyio.run(main)
"""


def test_the_servers_a_reload_removed_are_freed_and_the_rest_frozen_again(tmp_path: Path) -> None:
    """Frozen at start-up, the removed server's session (cycles and all) would never be freed: after the
    reload the collector sees everything, and once the retired server has stopped everything left is frozen."""
    script = tmp_path / "removed.py"
    script.write_text(REMOVED_SERVER_FREED)
    numbers, words = (str(SERVERS / name) for name in ("numbers.py", "words.py"))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), numbers, words],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["frozen at start"] > 10_000
    assert seen["frozen after the reload"] == 0
    assert seen["frozen again"] > 10_000
