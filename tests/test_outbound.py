"""The writer to a server walks each message once, except the arguments the call path has checked: those
very arguments (not equal ones), in the same context; the rest of the message is always walked."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from mcp_manifold._config import load_config
from mcp_manifold._errors import InvalidRequest
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.outbound import EncodableWrites, mark_checked
from mcp_manifold._sdk import call_tool_wire
from tests.conftest import server_entry

pytestmark = pytest.mark.anyio


def call(arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> SessionMessage:
    params: dict[str, Any] = {"name": "echo", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=params))


async def test_the_writer_skips_only_the_arguments_checked_in_its_context_or_their_copy() -> None:
    send, receive = anyio.create_memory_object_stream[SessionMessage](10)
    writes = EncodableWrites(send, "kitchen")
    # What the mark promises is taken at its word: a marked object is not walked again (here one the call
    # path would have refused, to show the walk is skipped; the call path marks only what passed).
    marked = {"text": "\ud800"}
    mark_checked(marked)
    await writes.send(call(marked))
    assert receive.receive_nowait().message.params["arguments"] is marked  # type: ignore[union-attr]
    # The rest of a request with marked arguments is walked.
    with pytest.raises(InvalidRequest, match=r"field 'params\._meta\.note' is not valid Unicode"):
        await writes.send(call(marked, {"note": "ok\udfff"}))
    # An equal copy (what the SDK's session sends: its request model dumped) is taken at the mark's word too;
    # arguments that differ are walked.
    copy = {"text": "\ud800"}
    await writes.send(call(copy))
    assert receive.receive_nowait().message.params["arguments"] is copy  # type: ignore[union-attr]
    with pytest.raises(InvalidRequest, match=r"field 'params\.arguments\.text' is not valid Unicode"):
        await writes.send(call({"text": "\ud800", "more": 1}))
    # A mark made in another context (another task's request) does not reach this one.
    elsewhere = {"text": "\udfff"}
    contextvars.copy_context().run(mark_checked, elsewhere)
    with pytest.raises(InvalidRequest, match=r"field 'params\.arguments\.text' is not valid Unicode"):
        await writes.send(call(elsewhere))
    # Marking None (arguments refused, or none) unmarks.
    mark_checked(None)
    with pytest.raises(InvalidRequest, match=r"field 'params\.arguments\.text' is not valid Unicode"):
        await writes.send(call(marked))
    assert receive.statistics().current_buffer_used == 0  # nothing refused reached the stream


async def test_checked_arguments_never_carry_a_bad_meta_to_a_server(write_config: Callable[..., Path]) -> None:
    """Through a real connection, as the call path sends (`call_tool_wire`, marked arguments): the writer
    still refuses what the arguments' check never saw, and the server keeps serving."""
    config = write_config({"kitchen": server_entry("kitchen.py")})
    async with Gateway(load_config(config)) as gateway:
        backend = gateway.pool["kitchen"]

        async def echo(text: str, meta: dict[str, Any] | None = None) -> Any:
            arguments = {"text": text}
            mark_checked(arguments)
            return await backend.request("tools/call", lambda session: call_tool_wire(session, "echo", arguments, meta))

        await echo("warm")
        pid = backend.pid
        with pytest.raises(
            InvalidRequest, match=r"tools/call was not sent to server 'kitchen': .*'params\._meta\.note'"
        ):
            await echo("fine", {"note": "\ud800"})
        after = await echo("after")
        text = after["content"][0]["text"] if isinstance(after, dict) else after.content[0].text
        assert text == "after"
        assert (backend.pid, backend.restarts, backend.state) == (pid, 0, "ready")
