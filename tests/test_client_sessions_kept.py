"""What the gateway keeps of the clients of a `session_scope: client` server is bounded by the sessions it
keeps open, not by every client it ever served. A 2026-07-28 principal has no session to end: its key in
the table of per-client listings stayed for good once its session was closed to make room (or idled out),
one entry per principal ever seen. Real `numbers.py` processes, one per principal's session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_manifold import load_config
from mcp_manifold._core.clients import Caller
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry, write_gateway_config

pytestmark = pytest.mark.anyio


def principal(name: str) -> Caller:
    """A 2026-07-28 client authenticated as `name`, as the HTTP front makes one for each of its requests."""
    caller = Caller(f"principal:{name}", principal=name)
    caller.era = "stateless"
    caller.identified = True
    return caller


async def test_principals_whose_sessions_closed_are_not_kept(tmp_path: Path) -> None:
    servers: dict[str, Any] = {"numbers": server_entry("numbers.py", session_scope="client")}
    config = load_config(write_gateway_config(tmp_path, servers, expose=["direct"], client_sessions_max=1))
    async with Gateway(config) as gateway:
        numbers = config.servers["numbers"]
        for name in ("alice", "bob", "carol"):
            caller = principal(name)
            await gateway.client_sessions.ensure_listed([numbers], caller)
            assert "numbers" in gateway.client_sessions.listings(caller)
        # One session is open (client_sessions_max): alice's and bob's were closed to make room.
        assert len(gateway.client_sessions.sessions()) == 1
        assert gateway.client_sessions.listed_clients() == 1


async def test_a_client_whose_own_session_is_reopened_is_watched_once(tmp_path: Path) -> None:
    """A session-era client's own session closes when it idles out (`client_session_idle`) or a reload changes
    its server, and opens again at its next call: each reopening added a callback to the client, kept as long as
    it stayed connected (20 reopenings, 22 callbacks)."""
    servers: dict[str, Any] = {"numbers": server_entry("numbers.py", session_scope="client")}
    config = load_config(write_gateway_config(tmp_path, servers, expose=["direct"]))
    async with Gateway(config) as gateway:
        numbers = config.servers["numbers"]
        caller = Caller("session:long-lived")
        caller.identified = True
        for _ in range(2):
            await gateway.client_sessions.ensure_listed([numbers], caller)
            gateway.client_sessions.close_server("numbers", "unused for a while")
        assert len(caller._on_close) == 1
        await gateway.client_sessions.ensure_listed([numbers], caller)
        caller.close()  # its session ends with it, as before
        assert not gateway.client_sessions.sessions() and gateway.client_sessions.listed_clients() == 0
