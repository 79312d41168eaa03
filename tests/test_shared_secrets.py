# ruff: noqa: F811 - the fixtures imported from tests.scale_out are parameters of the tests
"""The replicas' shared secrets after the store restarted empty and a replica started before the running ones
wrote theirs back: every replica adopts what the store holds (and says so), so they seal and open each other's
`requestState` and accept each other's token again; what one held before stays accepted. A real
redis-server."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from mcp_manifold._runtime.shared_state.sealing import SharedKeyCodec
from mcp_manifold._runtime.shared_state.shared_secrets import SharedSecret, keep_secrets, shared_secret
from mcp_manifold._runtime.shared_state.store import StateStore
from tests.scale_out import RedisServer, redis_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


async def test_replicas_converge_on_the_stored_secrets_after_an_empty_restart(
    redis_server: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old, new = StateStore(redis_server.url, "old"), StateStore(redis_server.url, "new")
    caplog.set_level(logging.WARNING)
    try:
        running = [SharedSecret(name, await shared_secret(old, name)) for name in ("replica-token", "request-state")]
        before = SharedKeyCodec(running[1]).seal(b"sealed before the restart")
        async with anyio.create_task_group() as group:
            group.start_soon(keep_secrets, old, running)  # writes back every 2 s
            redis_server.stop()
            redis_server.start()  # empty: nothing persisted
            # A replica started now, before the running one wrote its secrets back, makes new ones.
            started = [
                SharedSecret(name, await shared_secret(new, name)) for name in ("replica-token", "request-state")
            ]
            assert started[0].value != running[0].value
            with anyio.fail_after(10):
                while running[0].value != started[0].value or running[1].value != started[1].value:
                    await anyio.sleep(0.1)
            group.cancel_scope.cancel()
        # One sealing key now: what either seals, the other opens; what the old one sealed before still opens.
        codec_old, codec_new = SharedKeyCodec(running[1]), SharedKeyCodec(started[1])
        assert codec_new.unseal(codec_old.seal(b"after")) == b"after"
        assert codec_old.unseal(before) == b"sealed before the restart"
        assert running[0].accepted == [started[0].value, running[0].previous]
    finally:
        await old.close()
        await new.close()
    assert "the shared replica-token in the state store is not the one this replica held" in caplog.text
