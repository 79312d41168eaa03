"""A serving gateway's live state on disk, so `manifold servers` can show what it sees.

Breaker state, health and hub instances exist only inside the running gateway; `manifold servers`
is another process. The gateway rewrites `<data_dir>/live/<pid>.json` every couple of seconds and
removes it on exit; readers skip files whose process is gone (a gateway killed with SIGKILL).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from mcp_manifold._files import atomic_write, pid_is_alive

logger = logging.getLogger(__name__)

INTERVAL = 2.0


def live_dir(data_dir: str | Path) -> Path:
    return Path(data_dir).expanduser() / "live"


def write_snapshot(directory: Path, snapshot: dict[str, Any]) -> Path:
    """Write one snapshot atomically (readers never see half a file), readable by its owner only."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{os.getpid()}.json"
    atomic_write(path, json.dumps(snapshot, default=str))
    return path


async def publish(directory: Path, snapshot: Callable[[], dict[str, Any]], interval: float = INTERVAL) -> None:
    """Keep this process's snapshot fresh until cancelled, then remove it."""
    path = directory / f"{os.getpid()}.json"
    said: str | None = None  # the last failure logged in full: the next rounds would only repeat it
    try:
        while True:
            try:
                write_snapshot(directory, {"pid": os.getpid(), "written_at": time.time(), **snapshot()})
                said = None
            except OSError as exc:
                logger.warning("could not write the live status to %s: %s", directory, exc)
            except Exception as exc:  # it runs in the gateway's task group: a fault costs this round only
                if said == repr(exc):
                    logger.debug("live status still not taken: %r", exc)
                else:
                    logger.exception("could not take the live status (`manifold servers` shows the last one)")
                    said = repr(exc)
            await anyio.sleep(interval)
    finally:
        path.unlink(missing_ok=True)


def read_live(directory: Path) -> list[dict[str, Any]]:
    """Snapshots of the gateways running with this data dir, oldest first; stale files are removed."""
    snapshots = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            snapshot = json.loads(path.read_text())
            pid = int(snapshot["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not pid_is_alive(pid):
            path.unlink(missing_ok=True)
            continue
        snapshots.append(snapshot)
    return sorted(snapshots, key=lambda snapshot: snapshot.get("started_at", 0))
