"""One server that misbehaves at the gateway (tests/servers/unruly.py) costs only its own answers: its
floods and endless lists are bounded, and every other server, call and client goes on as before."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from tests.conftest import server_entry, stdio_gateway


def text_of(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["tools", "resources"])
async def test_a_storm_of_list_changed_costs_two_listings_not_one_each(write_config: Any, kind: str) -> None:
    """A server announcing 300 list changes in a burst used to be listed 300 times at once (each a full
    listing, judged by the pins); now one listing runs and one more follows it."""
    path = write_config(
        {"unruly": server_entry("unruly.py", "--tools", "50"), "other": server_entry("unruly.py")},
        {"expose": ["direct"]},
    )
    async with stdio_gateway(path) as client:
        await client.list_tools()
        assert text_of(await client.call_tool("unruly_listings", {})) == "1"
        assert text_of(await client.call_tool("unruly_storm", {"n": 300, "kind": kind})) == "stormed"
        assert text_of(await client.call_tool("other_fine", {})) == "fine"
        # The server answers in order, so each listing the gateway sent before this call is counted.
        assert int(text_of(await client.call_tool("unruly_listings", {}))) <= 3
        assert len((await client.list_tools()).tools) == 2 * 3 + 50
