"""The replicas of one gateway: each one's id, internal address and last heartbeat, in one Redis hash.

A replica writes its row every `HEARTBEAT` seconds under the name its held calls carry (`HeldCalls.holder`);
a row older than `STALE` counts as a replica that is gone. Another replica looks an address up here to hand
a held call's answers to the replica that holds it, and the status shows every row.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

HEARTBEAT = 2.0
STALE = 10.0


class ReplicaDirectory:
    def __init__(self, store: StateStore, holder: str, url: str | None, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.store = store
        self.holder = holder
        self.url = url
        self.snapshot = snapshot  # this replica's row for the status: servers, clients
        self.key = store.key("replicas")

    def row(self) -> dict[str, Any]:
        return {"id": self.store.replica_id, "url": self.url, "seen": time.time(), **self.snapshot()}

    async def beat(self) -> None:
        row = json.dumps(self.row(), default=str)
        await self.store.run("replica heartbeat", lambda: self.store.client.hset(self.key, self.holder, row))

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with contextlib.suppress(StateUnavailable):
            await self.beat()
        task_status.started()
        while True:
            await anyio.sleep(HEARTBEAT)
            with contextlib.suppress(StateUnavailable):
                await self.beat()

    async def leave(self) -> None:
        """A replica that stops cleanly takes its row out at once."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(StateUnavailable):
            await self.store.run("replica leaving", lambda: self.store.client.hdel(self.key, self.holder))

    async def rows(self) -> list[dict[str, Any]]:
        """Every live replica's row (stale rows are dropped from the hash as they are found)."""
        raw = await self.store.run("replicas", lambda: self.store.client.hgetall(self.key))
        now, rows, stale = time.time(), [], []
        for holder, text in raw.items():
            row = json.loads(text)
            if now - row.get("seen", 0) > STALE:
                stale.append(holder)
            else:
                rows.append(row)
        if stale:
            await self.store.run("replicas", lambda: self.store.client.hdel(self.key, *stale))
        return sorted(rows, key=lambda row: str(row.get("id")))

    async def address(self, holder: str) -> str | None:
        """The internal address of the replica whose held calls carry `holder`, if it is alive."""
        text = await self.store.run("replicas", lambda: self.store.client.hget(self.key, holder))
        if text is None:
            return None
        row = json.loads(text)
        return row.get("url") if time.time() - row.get("seen", 0) <= STALE else None
