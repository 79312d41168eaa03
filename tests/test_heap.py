"""The collector settings a started gateway takes (`_runtime/heap.py`): a served gateway, over stdio and
over HTTP, reports at exit (through a `sitecustomize` on its path) what its collector was set to."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_manifold._runtime.heap import YOUNG_THRESHOLD
from tests.conftest import free_port, gateway_over_http, server_entry, stdio_gateway

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
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MANIFOLD_TEST_HEAP_REPORT", str(report))
    return report


def assert_settled(report: Path) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(report.read_text())
    assert seen["frozen"] > 10_000  # what the imports and start-up built: tens of thousands of objects
    assert seen["threshold"][0] == YOUNG_THRESHOLD > gc.get_threshold()[0]
    assert seen["threshold"][1:] == list(gc.get_threshold()[1:])  # the older generations keep CPython's settings
    return seen


def test_a_stdio_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    config = write_config({"kitchen": server_entry("kitchen.py")})

    async def main() -> None:
        async with stdio_gateway(config) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content

    anyio.run(main)
    assert assert_settled(reporting)["unfrozen"] == []


def test_its_switch_leaves_the_collector_as_cpython_sets_it(
    write_config: Any, reporting: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MANIFOLD_GC_FREEZE", "0")
    config = write_config({"kitchen": server_entry("kitchen.py")})

    async def main() -> None:
        async with stdio_gateway(config) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content

    anyio.run(main)
    seen = json.loads(reporting.read_text())
    assert (seen["frozen"], seen["threshold"]) == (0, list(gc.get_threshold()))


def test_an_http_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    config = write_config({"kitchen": server_entry("kitchen.py")})
    port = free_port()

    async def main() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", cache=None) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content

    with gateway_over_http(config, port):
        anyio.run(main)
    assert_settled(reporting)


def test_a_reload_lets_the_collector_see_what_was_frozen_then_freezes_again(write_config: Any, reporting: Path) -> None:
    """The old config and the servers a reload removes may hold cycles: the collector gets to free them."""
    config = write_config({"kitchen": server_entry("kitchen.py")})
    port = free_port()

    async def main() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", cache=None) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content
            write_config({"numbers": server_entry("numbers.py")})  # the gateway watches its file: a reload
            with anyio.fail_after(30):
                while "numbers_add" not in {tool.name for tool in (await client.list_tools()).tools}:
                    await anyio.sleep(0.1)

    with gateway_over_http(config, port):
        anyio.run(main)
    seen = assert_settled(reporting)
    assert seen["unfrozen"] and all(count > 10_000 for count in seen["unfrozen"])  # each time with all frozen
