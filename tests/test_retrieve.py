"""The `retrieve` surface end to end: search, call_tool routing, dynamic registration and eviction."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.conftest import server_entry

pytestmark = pytest.mark.anyio

SERVERS = {
    "kitchen": server_entry("kitchen.py"),
    "numbers": server_entry("numbers.py"),
    "catalog": server_entry("catalog.py", "--count", "120"),
}


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def names_in(answer: str) -> list[str]:
    return [line.split(" ", 1)[0] for line in answer.splitlines() if line and not line.startswith(("  ", "("))]


async def test_call_tool_mode_finds_and_calls(connect: Any, write_config: Any) -> None:
    async with connect(write_config(SERVERS, {"expose": ["retrieve"]})) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == ["retrieve_tools", "call_tool"]
        description = tools[0].description or ""
        assert "Servers (tools): kitchen (" in description and "numbers (3), catalog (120)." in description

        found = text_of(await client.call_tool("retrieve_tools", {"query": "multiply two numbers"}))
        assert "numbers_multiply" in names_in(found)[:3]
        currency = names_in(text_of(await client.call_tool("retrieve_tools", {"query": "convert currency"})))
        assert currency and currency[0].startswith("catalog_")

        product = await client.call_tool("call_tool", {"name": "numbers_multiply", "args": {"a": 6, "b": 7}})
        assert text_of(product).startswith("42")

        wrong = await client.call_tool("call_tool", {"name": "numbers_multiply", "args": {"a": 6, "c": 7}})
        assert wrong.is_error and "unknown parameter(s) c" in text_of(wrong) and "b: number*" in text_of(wrong)
        missing = await client.call_tool("call_tool", {"name": "numbers_multiplyy", "args": {}})
        assert missing.is_error and "numbers_multiply" in text_of(missing)
        bad = await client.call_tool("retrieve_tools", {"query": ""})
        assert bad.is_error and "query" in text_of(bad)


async def test_index_follows_backend_changes(write_config: Any) -> None:
    from tests.conftest import stdio_gateway

    async with stdio_gateway(write_config({"kitchen": server_entry("kitchen.py")}, {"expose": ["retrieve"]})) as client:
        await client.call_tool("retrieve_tools", {"query": "echo"})
        await client.call_tool("call_tool", {"name": "kitchen_add_tool", "args": {"name": "teleport_banana"}})
        with anyio.fail_after(10):
            while True:
                found = names_in(text_of(await client.call_tool("retrieve_tools", {"query": "teleport banana"})))
                if found and found[0] == "kitchen_teleport_banana":
                    break
                await anyio.sleep(0.1)


async def test_dynamic_mode_registers_notifies_and_evicts(connect: Any, write_config: Any) -> None:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notices.append(message)

    config = write_config(SERVERS, {"expose": ["retrieve"], "routing": "dynamic", "tools_limit": 4})
    async with connect(config, message_handler=on_message) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["retrieve_tools"]
        await anyio.sleep(0.3)
        before = len(notices)
        await client.call_tool("retrieve_tools", {"query": "multiply two numbers", "limit": 3})
        with anyio.fail_after(5):
            while len(notices) == before:
                await anyio.sleep(0.02)
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert "numbers_multiply" in names and len(names) <= 1 + 4
        assert text_of(await client.call_tool("numbers_multiply", {"a": 2, "b": 5})).startswith("10")

        await client.call_tool("retrieve_tools", {"query": "convert currency", "limit": 3})
        names = [tool.name for tool in (await client.list_tools(cache_mode="refresh")).tools]
        assert len(names) == 1 + 4  # the pool never grows past tools_limit
        assert any(name.startswith("catalog_") for name in names)
        # numbers_multiply was used recently and scored high: it survives eviction.
        assert "numbers_multiply" in names
