"""The replicas of one gateway: each one's id, internal address and last heartbeat, in one Redis hash.

A replica writes its row every `HEARTBEAT` seconds under the name its held calls carry (`HeldCalls.holder`);
a row older than `STALE` counts as a replica that is gone. Another replica looks an address up here to hand
a held call's answers to the replica that holds it, and the status shows every row.

Every time here is the store's (`TIME`): a row is stamped with it and judged by it, so a replica whose clock
is behind the others' is not taken for gone. A row that cannot be read (not JSON, `seen` not a number, an
address that is not text: another writer's) is logged, removed and skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)

HEARTBEAT = 2.0
STALE = 10.0
# The heartbeat is written even into a full store (`maxmemory` with `noeviction`, which refuses HSET): the row
# replaces the replica's last one (a few hundred bytes, one per replica), and a replica whose heartbeats were
# refused would be taken for gone, every answer to a call it holds refused as "gone" through the others.
# KEYS: the replicas hash. ARGV: the replica's field, its row.
BEAT = """#!lua flags=allow-oom
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class ReplicaDirectory:
    def __init__(self, store: StateStore, holder: str, url: str | None, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.store = store
        self.holder = holder
        self.url = url
        self.snapshot = snapshot  # this replica's row for the status: servers, clients
        self.key = store.key("replicas")
        self._beat: Any = store.client.register_script(BEAT)

    async def beat(self) -> None:
        seconds, micros = await self.store.run("replica heartbeat", self.store.client.time)
        seen = seconds + micros / 1_000_000
        row = json.dumps({"id": self.store.replica_id, "url": self.url, "seen": seen, **self.snapshot()}, default=str)
        await self.store.run("replica heartbeat", lambda: self._beat(keys=[self.key], args=[self.holder, row]))

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
        """Every live replica's row, with `age` (seconds since its last heartbeat, by the store's clock); stale
        and unreadable rows are dropped from the hash as they are found."""
        now, raw = await self.store.run("replicas", lambda: self._timed(lambda pipe: pipe.hgetall(self.key)))
        rows, dropped = [], []
        for holder, text in raw.items():
            row = self._read(holder, text)
            if row is None or now - row["seen"] > STALE:
                dropped.append(holder)
            else:
                rows.append({**row, "age": max(0.0, now - row["seen"])})
        if dropped:
            await self.store.run("replicas", lambda: self.store.client.hdel(self.key, *dropped))
        return sorted(rows, key=lambda row: str(row.get("id")))

    async def address(self, holder: str) -> str | None:
        """The internal address of the replica whose held calls carry `holder`, if it is alive. A row that is
        not there may be one the store lost (emptied by a restart without persistence, or FLUSHALL), which its
        replica writes again at its next heartbeat: it is looked for until then. Taken for gone at once, the
        call ran on, held, while its client was told to call it again, and blocked the questions of other
        calls of that server meanwhile (until `held_call_timeout`)."""
        deadline = anyio.current_time() + 2 * HEARTBEAT + 1
        while True:
            now, text = await self.store.run("replicas", lambda: self._timed(lambda pipe: pipe.hget(self.key, holder)))
            if text is not None or anyio.current_time() >= deadline:
                break
            await anyio.sleep(HEARTBEAT / 4)
        row = None if text is None else self._read(holder, text)
        if row is None or now - row["seen"] > STALE:
            return None
        return row.get("url")

    def _read(self, holder: Any, text: Any) -> dict[str, Any] | None:
        try:
            return read_row(text)
        except ValueError as exc:
            shown = holder.decode(errors="backslashreplace") if isinstance(holder, bytes) else str(holder)
            logger.error("dropped replica row %r from %s: %s", shown, self.key, exc)
            return None

    async def _timed(self, queue: Callable[[Any], Any]) -> tuple[float, Any]:
        """The store's time and the answer of the command `queue` puts on a pipeline, in one round trip."""
        pipe = self.store.client.pipeline(transaction=False)
        pipe.time()
        queue(pipe)
        (seconds, micros), answer = await pipe.execute()
        return seconds + micros / 1_000_000, answer


def read_row(text: bytes | str) -> dict[str, Any]:
    """One replica's row; `ValueError` names what is wrong with it."""
    try:
        row = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise ValueError(f"a JSON {type(row).__name__}, not an object")
    seen = row.get("seen")
    if isinstance(seen, bool) or not isinstance(seen, int | float):
        raise ValueError(f"seen {seen!r} is not a number")
    if row.get("url") is not None and not isinstance(row["url"], str):
        raise ValueError(f"url {row['url']!r} is not text")
    return row
