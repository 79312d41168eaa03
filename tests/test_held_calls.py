"""Held calls (`_runtime/input_bridge.py`): a session-era server's call that the gateway keeps running for a
2026-07-28 client, so that the server may ask the client mid-call. `held_call_timeout` bounds only the wait
for the client's answers; the call itself runs as long as its client waits for it, and stops when its
client cancels, as any other call does.

A real gateway on stdio and over HTTP, `instance.py` behind it held to the session era, and a 2026-07-28
SDK client that declares elicitation, so its calls there are held (over HTTP once it authenticates, which
gives it sessions of its own to servers: docs/clients.md). Over HTTP such a client cancels by hanging up.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.input_bridge import HeldCalls, read_state
from tests.conftest import server_entry
from tests.test_eras import Host, http_gateway, ok_text, stdio_gateway, write_config

pytestmark = pytest.mark.anyio

SERVERS = {"inst": {**server_entry("instance.py", "--name", "held"), "protocol": "legacy", "session_scope": "client"}}
KEY = "held-calls-key-0123456789"  # principal `ada`'s API key on the HTTP gateway
AUTH = {"api_keys": {"ada": {"sha256": hashlib.sha256(KEY.encode()).hexdigest()}}}


@asynccontextmanager
async def gateway(folder: Path, transport: str, held_call_timeout: float) -> AsyncIterator[Client]:
    settings = {"held_call_timeout": held_call_timeout, "log_level": "info"}
    log = folder / "gateway.log"
    if transport == "stdio":
        config = write_config(folder, SERVERS, settings, "held.json")
        async with stdio_gateway(config, "auto", log) as running:
            yield running.client
        return
    config = write_config(folder, SERVERS, settings, "held.json")
    config.write_text(json.dumps({**json.loads(config.read_text()), "auth": AUTH}))
    with http_gateway(config, log) as url:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}))
            yield await stack.enter_async_context(Host().client(streamable_http_client(url, http_client=http), "auto"))


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_call_runs_past_held_call_timeout_while_its_client_waits(tmp_path: Path, transport: str) -> None:
    async with gateway(tmp_path, transport, held_call_timeout=1) as client:
        assert ok_text(await client.call_tool("inst_slow", {"seconds": 3})) == "slept"
        assert ok_text(await client.call_tool("inst_whoami", {})) == "held"
    assert "gave up on held call" not in (tmp_path / "gateway.log").read_text()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_call_stops_at_its_server_when_its_client_cancels(tmp_path: Path, transport: str) -> None:
    # A timeout far beyond the test: only the client's cancel can stop the call in time.
    async with gateway(tmp_path, transport, held_call_timeout=120) as client:
        assert ok_text(await client.call_tool("inst_cancellations", {})) == "0"
        with anyio.move_on_after(0.5):  # over HTTP the client hangs up
            await client.call_tool("inst_slow", {"seconds": 60})

        last = ""
        with anyio.move_on_after(10):
            while (last := ok_text(await client.call_tool("inst_cancellations", {}))) != "1":
                await anyio.sleep(0.1)
        assert last == "1", "the server's call went on after its client cancelled it"
        assert ok_text(await client.call_tool("inst_whoami", {})) == "held"  # nothing else broke


# --- HeldCalls itself: what it keeps ---------------------------------------------------------------------


class _Asker(Caller):
    @property
    def capabilities(self) -> types.ClientCapabilities:
        return types.ClientCapabilities(elicitation=types.ElicitationCapability())


QUESTION = types.ElicitRequestFormParams(message="Your name?", requested_schema={"type": "object", "properties": {}})


async def test_a_call_that_ends_while_its_questions_wait_is_dropped_after_the_timeout() -> None:
    """Its server failed while the client held its questions, and the client never came back: the call is
    not kept for ever (before, only calls still running were ever given up)."""
    held = HeldCalls(timeout=0.2)

    async def fails_after_asking(request: Request) -> Any:
        with anyio.move_on_after(0.1):
            await request.ask("elicitation/create", QUESTION)
        raise ManifoldError("server 'inst' went away")

    async with anyio.create_task_group() as task_group:
        await task_group.start(held.run)
        asked = await held.start(Request(_Asker()), fails_after_asking)
        assert isinstance(asked, types.InputRequiredResult)
        state = read_state(asked.request_state)
        assert state is not None
        await anyio.sleep(1.5)  # past the timeout, and a round of the reaper (every 0.5 s at the least)
        with pytest.raises(ManifoldError, match="no longer held"):
            await held.resume(state, Request(_Asker()))
        task_group.cancel_scope.cancel()
