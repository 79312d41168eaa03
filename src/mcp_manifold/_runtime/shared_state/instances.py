"""The hub's instance registry shared by the replicas: records in one Redis hash, with heartbeats and expiry.

A record is the discovery file's JSON (`discovery.py`), its `last_ping` refreshed by its writer; a record
that missed three refreshes is stale and dropped by whichever replica sees it first. Records reach the hash
two ways: `register_shared` (`manifold register` with `state_url` set), and each replica publishing the
`url` records it finds in its own discovery directory (a `command` record names a process on one machine,
so it stays that machine's). Every replica's hub lists what is in the hash besides its own directory.
A `command` record in the hash is skipped with a log line: whoever can write to the store could otherwise
make every replica run a command of their choosing (the discovery directory is trusted because only this
user can write to it; the store is not a place only this user writes).

While the store is down, each replica's hub keeps the instances it knew and its own directory's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable

import anyio

from mcp_manifold._runtime.discovery import InstanceRecord, RecordError, Scan, parse_record
from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

COMMAND_NOT_SHARED = (
    "--command cannot be registered in the shared state (state_url): no replica starts a command named in the "
    "store. Serve it over HTTP and register its --url, or register it in the discovery directory of the "
    "gateway on its own machine (without state_url)"
)


def _anywhere(_pid: int) -> bool:
    return True  # a pid names a process on some other machine: staleness is by last_ping alone


class SharedInstanceRecords:
    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.key = store.key("instances")
        self._last: dict[str, InstanceRecord] = {}  # the last good read, kept while the store is down

    async def merged(self, local: Scan) -> Scan:
        """`local` (this replica's directory) published, with every replica's live records added (a local
        record wins for its id). While the store is down: the records of the last good read, until stale."""
        try:
            await self.publish(list(local.live.values()))
            self._last = dict((await self.scan()).live)
        except StateUnavailable:
            now = time.time()
            self._last = {key: kept for key, kept in self._last.items() if kept.stale_reason(now, _anywhere) is None}
        for instance_id, record in self._last.items():
            if instance_id not in local.live and instance_id not in local.stale:
                local.live[instance_id] = record
        return local

    async def publish(self, records: list[InstanceRecord]) -> None:
        """Put this replica's directory's url records in the hash (their last_ping as their writer keeps it)."""
        fields = {record.id: json.dumps(record.to_json()) for record in records if record.url is not None}
        if fields:
            await self.store.run("instances", lambda: self.store.client.hset(self.key, mapping=fields))

    async def scan(self, now: float | None = None) -> Scan:
        """The live records in the hash; stale ones are removed from it."""
        now = time.time() if now is None else now
        scan = Scan()
        raw = await self.store.run("instances", lambda: self.store.client.hgetall(self.key))
        stale = []
        for field, text in raw.items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            try:
                record = parse_record(json.loads(text), f"shared record {name}")
            except (RecordError, ValueError) as exc:
                scan.problems[f"shared record {name}"] = str(exc)
                continue
            if record.command is not None:
                scan.problems[f"shared record {name}"] = (
                    f"shared record {name}: refused: it names a command, which would run on every replica; only "
                    "records with a 'url' are taken from the shared registry"
                )
                continue
            reason = record.stale_reason(now, _anywhere)
            if reason is None:
                scan.live[record.id] = record
            else:
                stale.append(name)
        if stale:
            await self.store.run("instances", lambda: self.store.client.hdel(self.key, *stale))
        return scan


async def register_shared(
    store: StateStore,
    record: InstanceRecord,
    *,
    clock: Callable[[], float] = time.time,
    on_written: Callable[[], None] | None = None,
) -> None:
    """`manifold register` with `state_url`: write `record`, refresh its last_ping, remove it on exit.
    `on_written()` once the store took the record (a full store refuses it: nothing is said registered)."""
    if record.command is not None:  # the replicas refuse it (see above): say so rather than register nothing
        raise ValueError(COMMAND_NOT_SHARED)
    records = SharedInstanceRecords(store)

    async def write() -> None:
        text = json.dumps(dataclasses.replace(record, last_ping=clock()).to_json())
        await store.run("instances", lambda: store.client.hset(records.key, record.id, text))

    await write()
    if on_written is not None:
        on_written()
    try:
        while True:
            await anyio.sleep(record.ping_interval)
            with contextlib.suppress(StateUnavailable):  # else written again at the next refresh
                await write()
    finally:
        with anyio.CancelScope(shield=True):
            await store.run("instances", lambda: store.client.hdel(records.key, record.id))
