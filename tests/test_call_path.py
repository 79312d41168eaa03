"""One call path: an observer registered on it sees every call, whichever way the call came in.

A real gateway in this process with every surface exposed, a real fixture backend, and the SDK's own
client talking to the gateway's MCP server (in memory); the fast lane is fed raw lines as the stdio
front feeds it; `manifold call` runs as the command line runs it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from mcp_manifold import _cli as cli
from mcp_manifold._config import load_config
from mcp_manifold._front.fast_lane import FastLane
from mcp_manifold._front.server import McpFront
from mcp_manifold._runtime.call_path import CallPath, CallRecord
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

SURFACES = ["direct", "proxy", "dispatch", "retrieve", "hub", "code"]


def write(tmp_path: Path, expose: list[str]) -> Path:
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "expose": expose, "discovery_dir": str(tmp_path / "instances")}
    path.write_text(json.dumps({"mcpServers": {"kitchen": server_entry("kitchen.py")}, "manifold": manifold}))
    return path


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with Gateway(load_config(write(tmp_path, SURFACES))) as running:
        yield running


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.anyio
async def test_every_surface_reaches_backends_through_the_one_call_path(gateway: Gateway) -> None:
    seen: list[CallRecord] = []
    gateway.calls.observe(seen.append)
    async with Client(McpFront(gateway).server, mode="legacy") as client:
        assert text_of(await client.call_tool("kitchen_echo", {"text": "direct"})) == "direct"
        proxied = await client.call_tool(
            "proxy", {"action": "call", "type": "tool", "path": "kitchen_echo", "args": {"text": "p"}}
        )
        assert not proxied.is_error
        dispatched = await client.call_tool(
            "proxy-dispatch", {"action": "call", "tool": "echo", "arguments": {"text": "d"}}
        )
        assert json.loads(text_of(dispatched))["content"] == [{"type": "text", "text": "d"}]
        retrieved = await client.call_tool("call_tool", {"name": "kitchen_echo", "args": {"text": "r"}})
        assert text_of(retrieved) == "r"
        connected = await client.call_tool("instances_connect", {"instance_id": "kitchen"})
        assert not connected.is_error, text_of(connected)
        assert text_of(await client.call_tool("echo", {"text": "h"})) == "h"  # the hub's instance tool
        program = await client.call_tool("execute_code", {"code": "return await tools.kitchen_echo({text: 'c'})"})
        assert text_of(program) == 'Returned: "c"'
        await client.read_resource("kitchen+kitchen://text")
        await client.get_prompt("kitchen_greet", {"name": "Ada"})
    tools = [(record.target.surface, record.target.name) for record in seen if record.kind == "tool"]
    assert tools == [
        ("direct", "echo"),
        ("proxy", "echo"),
        ("dispatch", "echo"),
        ("retrieve", "echo"),
        ("hub", "echo"),
        ("code", "echo"),
    ]
    program = [record for record in seen if record.kind == "program"]
    assert [(record.target.name, record.calls, record.outcome) for record in program] == [("execute_code", 1, "ok")]
    seen = [record for record in seen if record.kind != "program"]
    assert [(record.kind, record.target.name) for record in seen if record.kind != "tool"] == [
        ("action", "connect"),  # the hub's instances_connect: the gateway's own work
        ("resource", "kitchen://text"),
        ("prompt", "greet"),
    ]
    assert all(record.outcome == "ok" for record in seen)
    assert all(record.target.server == "kitchen" for record in seen if record.kind != "action")
    assert len({record.caller for record in seen}) == 1  # one client, one caller


@pytest.mark.anyio
async def test_failures_are_observed_with_their_outcome(gateway: Gateway) -> None:
    seen: list[CallRecord] = []
    stop = gateway.calls.observe(seen.append)
    async with Client(McpFront(gateway).server, mode="legacy") as client:
        assert (await client.call_tool("kitchen_fail", {"message": "nope"})).is_error
        with pytest.raises(Exception, match=r"(?i)unknown resource"):
            await client.read_resource("kitchen+kitchen://nothing-here")
        stop()
        await client.call_tool("kitchen_echo", {"text": "after"})
    assert [(record.kind, record.outcome) for record in seen] == [("tool", "error"), ("resource", "error")]
    assert seen[0].error is None  # the tool answered with an error result: the server itself is fine
    assert "Unknown resource" in (seen[1].error or "")


@pytest.mark.anyio
async def test_an_around_hook_wraps_every_call_and_hears_how_it_ended(gateway: Gateway) -> None:
    events: list[tuple[Any, ...]] = []

    @contextmanager
    def hook(kind: str, request: Any, target: Any) -> Iterator[Any]:
        events.append(("enter", kind, target.name))
        try:
            yield lambda record: events.append(("told", record.kind, record.outcome, record.backend is not None))
        finally:
            events.append(("left", kind))

    def observer(record: CallRecord) -> None:
        events.append(("observed", record.kind))  # after the hooks were told, while still inside them

    stop = gateway.calls.around(hook)
    gateway.calls.observe(observer)
    async with Client(McpFront(gateway).server, mode="legacy") as client:
        await client.call_tool("kitchen_echo", {"text": "x"})
        assert (await client.call_tool("kitchen_fail", {})).is_error
        with pytest.raises(Exception, match=r"(?i)unknown resource"):
            await client.read_resource("kitchen+kitchen://nothing-here")
        stop()
        await client.call_tool("kitchen_echo", {"text": "after"})
    assert events == [
        ("enter", "tool", "echo"),
        ("told", "tool", "ok", True),
        ("observed", "tool"),
        ("left", "tool"),
        ("enter", "tool", "fail"),
        ("told", "tool", "error", True),
        ("observed", "tool"),
        ("left", "tool"),
        ("enter", "resource", "kitchen://nothing-here"),
        ("told", "resource", "error", True),
        ("observed", "resource"),
        ("left", "resource"),
        ("observed", "tool"),  # after `stop`: observed, not wrapped
    ]


@pytest.mark.anyio
async def test_the_fast_lane_is_a_way_into_the_same_path(tmp_path: Path) -> None:
    async with Gateway(load_config(write(tmp_path, ["direct"]))) as gateway:
        await gateway.ensure_catalog()
        seen: list[CallRecord] = []
        gateway.calls.observe(seen.append)
        frames: list[dict[str, Any]] = []
        answered = anyio.Event()

        async def send(frame: bytes) -> None:
            frames.append(json.loads(frame))
            answered.set()

        async with anyio.create_task_group() as task_group:
            lane = FastLane(gateway, send)
            lane.take(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n', task_group)
            line = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "kitchen_echo", "arguments": {"text": "fast"}},
            }
            assert lane.take(json.dumps(line).encode(), task_group)
            with anyio.fail_after(10):
                await answered.wait()
        assert frames[0]["result"]["content"][0]["text"] == "fast"
        assert [(record.target.surface, record.target.exposed, record.caller) for record in seen] == [
            ("direct", "kitchen_echo", "fast-lane")
        ]


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CallRecord]]:
    """Every record of every call path made while the test runs (the CLI builds its own gateway)."""
    seen: list[CallRecord] = []
    original = CallPath.__init__

    def init(self: CallPath, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.observe(seen.append)

    monkeypatch.setattr(CallPath, "__init__", init)
    yield seen


def test_manifold_call_takes_the_same_path(tmp_path: Path, observed: list[CallRecord]) -> None:
    config = write(tmp_path, ["direct"])
    result = CliRunner().invoke(
        cli.app, ["call", "kitchen_echo", "--args", '{"text": "from the cli"}', "--config", str(config)]
    )
    assert result.exit_code == 0, result.output
    assert "from the cli" in result.output
    assert [(record.target.surface, record.target.name, record.caller) for record in observed] == [
        ("direct", "echo", "cli")
    ]
