"""Servers of other SDKs as they are: a 2026-07-28 answer without `resultType` (or a list without its cache
fields) is read as the schema means it, in one place, and logged once per server."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._core.interop import completed_result
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio


def test_a_result_without_resulttype_is_complete() -> None:
    raw = {"content": [{"type": "text", "text": "hi"}]}
    filled, missing = completed_result("tools/call", raw)
    assert filled == {**raw, "resultType": "complete"}
    assert missing == ("resultType",)


def test_a_cacheable_list_gets_the_uncached_defaults_and_keeps_its_own() -> None:
    filled, missing = completed_result("tools/list", {"tools": [], "ttlMs": 500})
    assert filled == {"tools": [], "ttlMs": 500, "resultType": "complete", "cacheScope": "private"}
    assert set(missing) == {"resultType", "cacheScope"}


def test_a_complete_result_comes_back_untouched() -> None:
    raw = {"content": [], "resultType": "input_required"}
    filled, missing = completed_result("tools/call", raw)
    assert filled is raw and missing == ()


async def test_a_terse_2026_server_answers_images_and_mixed_content(
    connect: Any, write_config: Callable[..., Path]
) -> None:
    config = write_config({"terse": server_entry("terse.py", protocol="modern")})
    async with connect(config) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"terse_picture", "terse_mixed"} <= names
        picture = await client.call_tool("terse_picture", {})
        assert not picture.is_error, picture
        assert [block.type for block in picture.content] == ["image"]
        assert isinstance(picture.content[0], types.ImageContent)
        assert picture.content[0].mime_type == "image/png"
        mixed = await client.call_tool("terse_mixed", {})
        assert not mixed.is_error, mixed
        assert [block.type for block in mixed.content] == ["text", "image", "resource"]
        assert mixed.content[2].resource.text == "a note"  # type: ignore[union-attr]


async def test_the_gap_is_logged_once_per_server(
    write_config: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config({"terse": server_entry("terse.py", protocol="modern")})
    with caplog.at_level(logging.INFO, logger="mcp_manifold"):
        async with Gateway(load_config(config)) as gateway:
            backend = gateway.pool["terse"]
            for _ in range(3):
                result = await backend.request("tools/call", lambda session: session.call_tool("picture", {}))
                assert isinstance(result, types.CallToolResult) and not result.is_error
    told = [record.getMessage() for record in caplog.records if "schema means their absence" in record.getMessage()]
    assert len(told) == 1 and "'terse'" in told[0] and "resultType" in told[0], told


def test_a_complete_cacheable_result_comes_back_untouched_and_a_partial_one_is_filled() -> None:
    whole = {"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    filled, missing = completed_result("tools/list", whole)
    assert filled is whole and missing == ()
    filled, missing = completed_result("tools/list", {"tools": [], "resultType": "complete", "ttlMs": 5})
    assert filled == {"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "private"}
    assert missing == ("cacheScope",)


@pytest.mark.parametrize(("protocol", "wrapped"), [("legacy", False), ("modern", True)])
async def test_only_a_2026_session_keeps_the_liberal_reader(
    write_config: Callable[..., Path], protocol: str, wrapped: bool
) -> None:
    """A session-era session never reads a 2026-07-28 answer: after its handshake its requests skip the
    wrapper (one coroutine and a look at each answer per call); a 2026-07-28 one keeps it."""
    config = write_config({"kitchen": server_entry("kitchen.py", protocol=protocol)})
    async with Gateway(load_config(config)) as gateway:
        backend = gateway.pool["kitchen"]
        for _ in range(2):
            result = await backend.request("tools/call", lambda session: session.call_tool("echo", {"text": "hi"}))
            assert isinstance(result, types.CallToolResult) and not result.is_error
        dispatcher = backend._session._dispatcher  # type: ignore[union-attr]
        assert ("send_raw_request" in vars(dispatcher)) is wrapped
