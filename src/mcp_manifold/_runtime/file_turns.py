"""Refreshes of one token file taken in turn, by every session and process that uses it.

Without `state_url` a server's tokens are one file in the data dir, used by each session the gateway has
to that server (one per client with `session_scope: client`) and by each command run on that data dir
(`manifold call` beside `manifold serve`). An authorization server that rotates refresh tokens takes each
one once (one that detects a second use revokes the whole grant), so a refresh holds an exclusive lock on
a file beside the tokens (`flock`: freed when its holder closes it or dies), and whoever comes next reads
the stored tokens again before refreshing (`remote_auth._SharedRefresh`). The wait is polled: it happens
only while another refresh is under way. Without `flock` (Windows) refreshes are not taken in turn.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

logger = logging.getLogger(__name__)

_WAIT = 60.0  # seconds a refresh waits for another at most (a refresh is one HTTP round trip)
_POLL = 0.05  # seconds between looks while another refresh holds the lock


@asynccontextmanager
async def file_turn(lock: Path, what: str) -> AsyncIterator[None]:
    """Hold the lock on the file `lock` (made 0600 if missing), waiting while another holder has it; after
    `_WAIT` seconds go on anyway (a holder stuck that long is not refreshing any more), saying so."""
    handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + _WAIT
        while not _took(handle):
            if time.monotonic() >= deadline:
                logger.warning("%s: another refresh took over %gs; refreshing anyway", what, _WAIT)
                break
            await anyio.sleep(_POLL)
        yield
    finally:
        os.close(handle)  # frees the lock


def _took(handle: int) -> bool:
    """Whether the lock on `handle` was free, and is now held."""
    if sys.platform == "win32":  # pragma: no cover - no flock: refreshes are not taken in turn there
        return True
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # a file system without locks: refresh as before
        logger.debug("no lock on %s: %s", handle, exc)
    return True
