"""Integration through the published reference server, @modelcontextprotocol/server-everything (npm)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from tests.conftest import NODE_BIN, server_entry

pytestmark = [pytest.mark.anyio, pytest.mark.node]

EVERYTHING = NODE_BIN / "mcp-server-everything"
if not EVERYTHING.exists():
    pytest.skip(
        "server-everything is not installed (make test installs it where npm is present)", allow_module_level=True
    )


def servers() -> dict[str, Any]:
    return {"everything": {"command": str(EVERYTHING), "args": []}, "numbers": server_entry("numbers.py")}


async def test_everything_behind_the_gateway(connect: Any, write_config: Any) -> None:
    async with connect(write_config(servers())) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"everything_echo", "everything_get-sum", "numbers_add"} <= names

        echo = await client.call_tool("everything_echo", {"message": "through the gateway"})
        assert "through the gateway" in echo.content[0].text  # type: ignore[union-attr]
        total = await client.call_tool("everything_get-sum", {"a": 2, "b": 40})
        assert "42" in total.content[0].text  # type: ignore[union-attr]
        image = await client.call_tool("everything_get-tiny-image", {})
        assert any(isinstance(item, types.ImageContent) for item in image.content)

        resources = [r for r in (await client.list_resources()).resources if r.uri.startswith("everything+")]
        assert resources
        first = await client.read_resource(resources[0].uri)
        assert first.contents

        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert any(name.startswith("everything_") for name in prompts)
