"""One server that misbehaves at the gateway (tests/servers/unruly.py) costs only its own answers: its
floods and endless lists are bounded, and every other server, call and client goes on as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._errors import BackendError
from mcp_manifold._runtime import listing_fetch
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry, stdio_gateway
from tests.raw_wire import live_backends


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
        assert len((await client.list_tools()).tools) == 2 * 5 + 50


@pytest.mark.anyio
async def test_a_listing_that_names_a_cursor_again_is_refused_and_the_others_listed(write_config: Any) -> None:
    """A server naming the same next cursor on every page used to be paged 10,000 times, every page kept
    (with 100 tools: 1.5 GB and two minutes, while every client's first `tools/list` waited). Its listing
    is refused, and the others' tools are listed."""
    path = write_config(
        {"unruly": server_entry("unruly.py", "--cursor-loop"), "other": server_entry("unruly.py")},
        {"expose": ["direct"]},
    )
    async with stdio_gateway(path) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"other_storm", "other_listings", "other_fine", "other_spew", "other_objects"}, len(names)
        assert text_of(await client.call_tool("other_fine", {})) == "fine"


@pytest.mark.anyio
async def test_a_listing_longer_than_the_most_items_is_refused(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose every page names a new cursor: its listing is refused, naming why, once it holds more
    than `MOST_ITEMS` (100,000, lowered here), not kept for 10,000 pages."""
    monkeypatch.setattr(listing_fetch, "MOST_ITEMS", 1_000, raising=False)
    path = write_config({"unruly": server_entry("unruly.py", "--endless", "--tools", "100")}, {"expose": ["direct"]})
    async with Gateway(load_config(path)) as gateway:
        backend = gateway.pool.backends["unruly"]
        with pytest.raises(BackendError, match=r"^server 'unruly': tools/list: more than 1000 items; not listed$"):
            await backend.list_all()
        result = await backend.request("tools/call", lambda session: session.call_tool("listings", {}))
        assert text_of(result) == "10"  # the tenth page passed the limit


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_schema_whose_refs_loop_or_fan_out_or_whose_values_are_huge_is_cut_in_a_search_answer(
    write_config: Any, mode: str
) -> None:
    """A tool whose input schema's `$defs` refer to themselves made every search that found it fail
    (RecursionError); one whose 40 definitions each name the next twice held the gateway's event loop for
    2**40 steps, so no client got any answer and SIGTERM went unheard; one whose `const` and `enum` values
    are 1 MB each made the answer of every search that found it 9 MB. The search answer now writes the
    schema as far as its budget, values as far as 40 characters, and cuts the rest ("…"), in
    retrieve_tools and in code mode's search_tools."""
    shapes = ("loop", "fanout", "huge")
    path = write_config(
        {shape: server_entry("unruly.py", "--schema", shape) for shape in shapes},
        {"expose": ["retrieve", "code"], "search_embedder": "bm25"},
    )
    async with stdio_gateway(path, mode=mode) as client:
        with anyio.fail_after(60):  # before the fix: no answer, ever
            for search in ("retrieve_tools", "search_tools"):
                found = await client.call_tool(search, {"query": "forecast the weather for a city", "limit": 3})
                said = text_of(found)
                assert not found.is_error, said
                assert all(f"{shape}_forecast" in said for shape in shapes), said
                assert "…" in said and len(said) < 5_000, said[:5_000]


@pytest.mark.anyio
@pytest.mark.parametrize("leg", ["1", "0"])
async def test_an_answer_of_too_many_objects_closes_that_servers_connection_unparsed(
    write_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leg: str
) -> None:
    """Parsed, an object costs the gateway about 250 bytes however short it is on the wire: a server's answer
    of 7.8 MB of `{}` took it to 970 MB and held other clients 7 s, and `max_answer_bytes` (64 MB) let eight
    times that through. Past one object or array per 64 bytes of `max_answer_bytes` (16,384 here) the line is
    not parsed and the connection is closed, as for a line too long; the other server answers."""
    monkeypatch.setenv("MANIFOLD_STDIO_LEG", leg)
    path = write_config(
        {"unruly": server_entry("unruly.py", timeout=30), "other": server_entry("unruly.py")},
        {"expose": ["direct"], "max_answer_bytes": 1 << 20},
    )
    async with stdio_gateway(path) as client:
        fits = await client.call_tool("unruly_objects", {"kb": 32})  # 10,922 objects: answered
        assert not fits.is_error and len(fits.structured_content["items"]) == 10_922  # type: ignore[index]
        # A 73 KiB answer of 13,653 objects, then in the same write 20 log lines of 512 `[`: each line is judged
        # alone (they were counted together, and the connection closed).
        fits = await client.call_tool("unruly_objects", {"kb": 40, "pad_kb": 20, "logs": 20})
        assert not fits.is_error and len(fits.structured_content["items"]) == 13_653  # type: ignore[index]
        refused = await client.call_tool("unruly_objects", {"kb": 256})
        assert refused.is_error and "closed the connection" in text_of(refused), text_of(refused)
        assert text_of(await client.call_tool("other_fine", {})) == "fine"
        status = (await live_backends(tmp_path / "data"))["unruly"]
        said = (
            "server 'unruly' wrote an answer of more than 16384 objects and arrays (one per 64 bytes of"
            " max_answer_bytes) on stdout"
        )
        assert status["last_error"].startswith(said), status
        assert text_of(await client.call_tool("unruly_fine", {})) == "fine"


@pytest.mark.anyio
@pytest.mark.parametrize("leg", ["1", "0"])
async def test_a_stdout_line_that_never_ends_closes_that_servers_connection(
    write_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leg: str
) -> None:
    """A server writing a line with no end on stdout was read whole until its newline (400 MB took the
    gateway to 877 MB; without end, all its memory). Past `max_answer_bytes` (64 MB by default, 1 MB here)
    the connection to that server is closed: that call fails, the other server answers, and the server starts
    again on next need. The same with the raw stdio leg and without it."""
    monkeypatch.setenv("MANIFOLD_STDIO_LEG", leg)
    path = write_config(
        {"unruly": server_entry("unruly.py", timeout=30), "other": server_entry("unruly.py")},
        {"expose": ["direct"], "max_answer_bytes": 1 << 20},
    )
    async with stdio_gateway(path) as client:
        assert text_of(await client.call_tool("unruly_fine", {})) == "fine"
        spewed = await client.call_tool("unruly_spew", {"mb": 2})
        assert spewed.is_error and "closed the connection" in text_of(spewed), text_of(spewed)
        assert text_of(await client.call_tool("other_fine", {})) == "fine"
        status = (await live_backends(tmp_path / "data"))["unruly"]
        said = "server 'unruly' wrote a line of more than 1 MB on stdout (max_answer_bytes)"
        assert status["last_error"] == said, status
        assert text_of(await client.call_tool("unruly_fine", {})) == "fine"
