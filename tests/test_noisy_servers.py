"""A server that sends more than its clients can take (tests/servers/noisy.py) costs the gateway a bounded
amount of work and memory: its stderr is read for the lines kept, and what it sends a call's client waits
in a bounded queue."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_manifold._config import load_config
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.gateway import Gateway
from tests.conftest import server_entry


@pytest.mark.anyio
async def test_a_flood_of_stderr_lines_is_read_for_the_lines_kept(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server writing short stderr lines as fast as it can: each line the gateway takes costs its event
    loop some 15 us (decoding, scrubbing), and a read of 64 kB held 32,000 of them, so every other server's
    calls waited half a second at a time (860 ms instead of 1). Only the lines kept (`stderr_lines`) of each
    read are taken now: of 300,000 lines, the gateway takes a few thousand, and keeps the last ones."""
    taken = 0
    take = Backend._on_stderr_line

    def counted(self: Backend, line: str) -> None:
        nonlocal taken
        taken += 1
        take(self, line)

    monkeypatch.setattr(Backend, "_on_stderr_line", counted)
    path = write_config({"noisy": server_entry("noisy.py")}, {"expose": ["direct"], "stderr_lines": 20})
    async with Gateway(load_config(path)) as gateway:
        backend = gateway.pool.backends["noisy"]
        result = await backend.request("tools/call", lambda session: session.call_tool("stderr", {"lines": 300_000}))
        assert not result.is_error
        with anyio.fail_after(30):  # the last 64 kB the server wrote may still be in the pipe
            while not backend.stderr or backend.stderr[-1] != "done":
                await anyio.sleep(0.01)
        assert list(backend.stderr) == ["e"] * 19 + ["done"]
        assert taken < 30_000, taken
