"""A name hidden by the caller's profile and a name that does not exist are refused the same way: the
same answer, and the same kind of record (both are refusals), so that neither tells one from the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp_manifold._runtime.audit import audit_dir, read_entries
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

SERVERS = {"numbers": server_entry("numbers.py"), "words": server_entry("words.py")}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


async def test_a_hidden_name_and_a_missing_one_are_both_recorded_as_refusals(tmp_path: Path, connect: Any) -> None:
    path = tmp_path / "mcp.json"
    settings = {"data_dir": str(tmp_path / "data"), "profile": "writer", "expose": ["direct", "dispatch"]}
    profiles = {"writer": {"servers": ["words"]}}
    path.write_text(json.dumps({"mcpServers": SERVERS, "manifold": settings, "profiles": profiles}))
    async with connect(path) as client:
        for name in ("numbers_add", "no_such_tool"):
            refused = await client.call_tool(name, {"a": 1, "b": 2})
            assert refused.is_error and text_of(refused).startswith(f"unknown tool {name!r} for profile 'writer'")
        for name in ("add", "no_such_tool"):
            refused = await client.call_tool("proxy-dispatch", {"action": "call", "tool": name})
            assert refused.is_error and f"no connection offers a tool named {name!r}" in text_of(refused)
        for name in ("numbers_explain", "no_such_prompt"):
            with pytest.raises(Exception, match=f"unknown prompt '{name}' for profile 'writer'"):
                await client.get_prompt(name, {"topic": "x"})
        for uri in ("numbers+numbers://constants", "numbers+numbers://nothing"):
            with pytest.raises(Exception, match="unknown resource"):
                await client.read_resource(uri)
    lines = [line for line in read_entries(audit_dir(tmp_path / "data")) if line["kind"] != "action"]
    refusals = [(line["kind"], line["name"], line["outcome"], line["profile"]) for line in lines]
    assert refusals == [
        ("tool", "numbers_add", "denied", "writer"),
        ("tool", "no_such_tool", "denied", "writer"),
        ("tool", "numbers_add", "denied", "writer"),  # dispatch's `add`: the hidden entry's exposed name
        ("tool", "no_such_tool", "denied", "writer"),
        ("prompt", "numbers_explain", "denied", "writer"),
        ("prompt", "no_such_prompt", "denied", "writer"),
        ("resource", "numbers+numbers://constants", "denied", "writer"),
        ("resource", "numbers+numbers://nothing", "denied", "writer"),
    ]
    assert len({frozenset(line) for line in lines}) == 1  # one shape: the same fields in every record
    for line in lines:
        assert line["error"].startswith(f"unknown {line['kind']} {line['name']!r} for profile 'writer'")
