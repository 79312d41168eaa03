"""`manifold register`: announce a running MCP server to hubs until interrupted.

Writes the server's instance record into the discovery directory, refreshes its `last_ping`
every interval, and removes it on the way out (Ctrl-C, SIGTERM or cancellation), so a hub sees
the server exactly while this runs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from mcp_manifold._runtime.discovery import InstanceRecord, new_instance_id, parse_record, remove_record, write_record

logger = logging.getLogger(__name__)


def build_record(
    name: str,
    *,
    url: str | None = None,
    command: str | None = None,
    directory: str | None = None,
    pid: int | None = None,
    instance_id: str | None = None,
    interval: float = 10.0,
    now: float | None = None,
) -> InstanceRecord:
    """A checked record for one server; raises RecordError naming what is wrong."""
    now = time.time() if now is None else now
    argv = shlex.split(command) if command else []
    data = {
        "id": instance_id or new_instance_id(name),
        "name": name,
        "url": url,
        "command": argv[0] if argv else None,
        "args": argv[1:],
        "directory": directory,
        "pid": pid,
        "started_at": now,
        "last_ping": now,
        "ping_interval": interval,
        "generated_id": instance_id is None,
    }
    return parse_record({key: value for key, value in data.items() if value is not None}, "register")


async def keep_registered(
    directory: Path,
    record: InstanceRecord,
    *,
    clock: Callable[[], float] = time.time,
    on_written: Callable[[Path], None] | None = None,
) -> None:
    """Write `record`, refresh its `last_ping` every `record.ping_interval` seconds, remove it on exit."""
    path = write_record(directory, dataclasses.replace(record, last_ping=clock()))
    if on_written is not None:
        on_written(path)
    try:
        while True:
            await anyio.sleep(record.ping_interval)
            try:
                write_record(directory, dataclasses.replace(record, last_ping=clock()))
            except OSError as exc:  # a full disk or a removed directory: keep trying, say so
                logger.warning("could not refresh %s: %s", path, exc)
    finally:
        remove_record(directory, record.id)


async def register_until_stopped(
    directory: Path, record: InstanceRecord, on_written: Callable[[Path], None] | None = None
) -> None:
    """`keep_registered` until SIGINT or SIGTERM (SIGTERM would otherwise skip the clean-up)."""
    # A first write out here, so an unwritable directory raises a plain OSError, not a task group's.
    write_record(directory, dataclasses.replace(record, last_ping=time.time()))
    await _until_stopped(keep_registered(directory, record, on_written=on_written))


async def register_shared_until_stopped(
    state_url: str, record: InstanceRecord, on_written: Callable[[], None] | None = None
) -> None:
    """`manifold register` with `state_url` set: the record in the replicas' shared registry, refreshed
    until SIGINT or SIGTERM, then removed."""
    from mcp_manifold._runtime.shared_state.instances import register_shared
    from mcp_manifold._runtime.shared_state.store import StateStore

    store = StateStore(state_url, "register", announce=False)
    try:
        # Out here, so an unreachable store is one plain error (not a task group's) before any "registered".
        await store.run("register", store.client.ping)
        await _until_stopped(register_shared(store, record, on_written=on_written))
    finally:
        await store.close()


async def _until_stopped(work: Awaitable[None]) -> None:
    """Run `work` until it ends or SIGINT or SIGTERM cancels it (so its clean-up runs)."""
    async with anyio.create_task_group() as tasks:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _signal in signals:
                    tasks.cancel_scope.cancel()
                    return

        tasks.start_soon(stop_on_signal)
        await work
        tasks.cancel_scope.cancel()


def default_pid() -> int:
    """The pid a record carries by default: this process, so the record dies with it."""
    return os.getpid()
