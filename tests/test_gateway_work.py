"""The gateway's own work for a caller (surfaces' lists, searches, result-file reads and greps) goes
through the policy like a call: rate-limited, counted in flight, audited as kind "action"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_manifold._runtime.audit import audit_dir, read_entries
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

TOOL = "proxy-dispatch"
KITCHEN = server_entry("kitchen.py")
LONG_LINE = "x" * 40_000 + "y"  # `(x+)+$` backtracks on it without end in a backtracking engine


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def write(tmp_path: Path, **settings: Any) -> Path:
    path = tmp_path / "mcp.json"
    manifold = {"data_dir": str(tmp_path / "data"), "expose": ["direct", "dispatch", "proxy", "retrieve"], **settings}
    path.write_text(json.dumps({"mcpServers": {"kitchen": KITCHEN}, "manifold": manifold}))
    return path


async def spill(client: Any) -> str:
    spilled = await client.call_tool(
        TOOL, {"action": "call", "tool": "echo", "arguments": {"text": LONG_LINE}, "resultToFile": True}
    )
    assert not spilled.is_error and spilled.meta is not None, text_of(spilled)
    return str(spilled.meta["resultFile"])


def actions(tmp_path: Path) -> list[tuple[str, str | None, str]]:
    """(kind, original name, outcome) of each audit line."""
    return [(line["kind"], line["original"], line["outcome"]) for line in read_entries(audit_dir(tmp_path / "data"))]


async def test_greps_beyond_the_calls_in_flight_are_refused_and_a_runaway_pattern_answers_at_once(
    tmp_path: Path, connect: Any
) -> None:
    async with connect(write(tmp_path, principal_max_calls=2)) as client:
        path = await spill(client)
        grep = {"action": "readresult", "resultFile": path, "op": "grep", "pattern": "(x+)+$"}
        with anyio.fail_after(30):  # RE2: no backtracking (a backtracking engine ran it for its full timeout)
            found = await client.call_tool(TOOL, grep)
        assert not found.is_error and "no line of 1 matches '(x+)+$'" in text_of(found), text_of(found)

        slow: list[types.CallToolResult] = []

        async def hold_a_slot() -> None:
            slow.append(await client.call_tool("kitchen_slow", {"seconds": 6}))

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(hold_a_slot)
            task_group.start_soon(hold_a_slot)
            await anyio.sleep(2)  # both calls are in flight: the principal's two slots are taken
            refused = [await client.call_tool(TOOL, grep) for _ in range(4)]
            listed = await client.call_tool(TOOL, {"action": "list"})
        assert [text_of(result) for result in slow] == ["slept", "slept"]
        for result in (*refused, listed):
            assert result.is_error, text_of(result)
            assert "principal 'anonymous' already has 2 call(s) in flight (limit 2)" in text_of(result)
        again = await client.call_tool(TOOL, grep)  # the slots are free again: nothing leaked
        assert not again.is_error, text_of(again)
    lines = actions(tmp_path)
    assert lines.count(("action", "readresult", "rate_limited")) == 4
    assert ("action", "list", "rate_limited") in lines
    assert lines.count(("action", "readresult", "ok")) == 2


async def test_a_rate_limit_applies_to_readresult_list_search_and_proxy_lists(tmp_path: Path, connect: Any) -> None:
    async with connect(write(tmp_path, rate_limit=0.01, rate_burst=4)) as client:
        path = await spill(client)  # 1
        stat = await client.call_tool(TOOL, {"action": "readresult", "resultFile": path})  # 2
        assert not stat.is_error, text_of(stat)
        listed = await client.call_tool(TOOL, {"action": "list"})  # 3
        assert not listed.is_error, text_of(listed)
        found = await client.call_tool("retrieve_tools", {"query": "echo text"})  # 4
        assert not found.is_error, text_of(found)
        for refused in (
            await client.call_tool(TOOL, {"action": "readresult", "resultFile": path, "op": "head"}),
            await client.call_tool(TOOL, {"action": "list"}),
            await client.call_tool(TOOL, {"action": "search", "query": "echo"}),
            await client.call_tool("proxy", {"action": "list", "type": "tool"}),
            await client.call_tool("retrieve_tools", {"query": "echo text"}),
        ):
            assert refused.is_error, text_of(refused)
            assert "principal 'anonymous' is over its rate limit of 0.01 call(s) per second" in text_of(refused)
    assert actions(tmp_path) == [
        ("tool", "echo", "ok"),
        ("action", "readresult", "ok"),
        ("action", "list", "ok"),
        ("action", "search", "ok"),
        ("action", "readresult", "rate_limited"),
        ("action", "list", "rate_limited"),
        ("action", "search", "rate_limited"),
        ("action", "list tools", "rate_limited"),
        ("action", "search", "rate_limited"),
    ]
    surfaces = [entry["surface"] for entry in read_entries(audit_dir(tmp_path / "data")) if entry["kind"] == "action"]
    assert surfaces == ["dispatch", "dispatch", "retrieve", "dispatch", "dispatch", "dispatch", "proxy", "retrieve"]


RESOURCE = "kitchen+kitchen://text"


@pytest.mark.session_era("resources/subscribe and logging/setLevel are gone at 2026-07-28")
async def test_a_rate_limit_applies_to_subscribe_and_set_level(tmp_path: Path, connect: Any) -> None:
    """Each is a request to a server (setLevel to every one): before, a principal over its rate limit could
    still send them without end."""
    async with connect(write(tmp_path, rate_limit=0.01, rate_burst=3)) as client:
        with pytest.warns(Warning):  # both are deprecated in 2026-07-28
            await client.subscribe_resource(RESOURCE)  # 1
            await client.set_logging_level("info")  # 2
            await client.subscribe_resource(RESOURCE)  # 3
            for refused in (client.subscribe_resource(RESOURCE), client.set_logging_level("debug")):
                with pytest.raises(MCPError) as caught:
                    await refused
                assert "principal 'anonymous' is over its rate limit of 0.01 call(s) per second" in str(caught.value)
        with pytest.raises(MCPError, match="over its rate limit"):  # the same bucket as reads
            await client.read_resource(RESOURCE)
    assert actions(tmp_path) == [
        ("action", "resources/subscribe", "ok"),
        ("action", "logging/setLevel", "ok"),
        ("action", "resources/subscribe", "ok"),
        ("action", "resources/subscribe", "rate_limited"),
        ("action", "logging/setLevel", "rate_limited"),
        ("resource", "kitchen://text", "rate_limited"),
    ]


@pytest.mark.modern_era(reason="subscriptions/listen is 2026-07-28's")
async def test_a_listen_stream_over_the_rate_limit_is_refused_saying_so(tmp_path: Path, connect: Any) -> None:
    """A stream subscribes each resource it names at its server: each is admitted like a subscribe."""
    async with connect(write(tmp_path, rate_limit=0.01, rate_burst=2)) as client:
        async with client.listen(resource_subscriptions=[RESOURCE]) as stream:  # 1
            assert stream is not None
        with pytest.raises(MCPError) as caught:
            async with client.listen(resource_subscriptions=[RESOURCE, RESOURCE.replace("text", "blob")]):  # 2, 3
                pass
        assert "principal 'anonymous' is over its rate limit" in str(caught.value)
    assert [line for line in actions(tmp_path) if line[2] == "rate_limited"] == [
        ("action", "resources/subscribe", "rate_limited")
    ]
