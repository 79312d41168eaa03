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

def _report():
    with open(os.environ["MANIFOLD_TEST_HEAP_REPORT"], "w") as out:
        json.dump({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}, out)

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


def assert_settled(report: Path) -> None:
    seen: dict[str, Any] = json.loads(report.read_text())
    assert seen["frozen"] > 10_000  # what the imports and start-up built: tens of thousands of objects
    assert seen["threshold"][0] == YOUNG_THRESHOLD > gc.get_threshold()[0]
    assert seen["threshold"][1:] == list(gc.get_threshold()[1:])  # the older generations keep CPython's settings


def test_a_stdio_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    config = write_config({"kitchen": server_entry("kitchen.py")})

    async def main() -> None:
        async with stdio_gateway(config) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content

    anyio.run(main)
    assert_settled(reporting)


def test_an_http_gateway_freezes_what_start_up_built(write_config: Any, reporting: Path) -> None:
    config = write_config({"kitchen": server_entry("kitchen.py")})
    port = free_port()

    async def main() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", cache=None) as client:
            assert (await client.call_tool("kitchen_echo", {"text": "hi"})).content

    with gateway_over_http(config, port):
        anyio.run(main)
    assert_settled(reporting)
