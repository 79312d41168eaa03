"""How often a remote server's event streams are opened again: a few at once, then `RATE` a second at most.

The SDK's client opens a server's GET stream (what the server sends outside any request) again each time
it ends, after the `retry` interval the server last named, for as long as the session lasts, and takes up
an answer's stream that ended early the same way. A server that named `retry: 0` and ended each stream at
once was sent some 190 GETs a second for good: a fifth of a core of the gateway, and other servers' calls
took 13 ms instead of 4. Each backend session's GETs are paced here instead: up to `BURST` back to back
(calls taking up their streams at once), then one every 1/`RATE` s.
"""

from __future__ import annotations

import logging
import time

import anyio
import httpx2

logger = logging.getLogger(__name__)

BURST = 20  # GETs one session may send back to back
RATE = 20.0  # a second, past the burst


class GetPacing:
    """An httpx request hook for one backend session's clients: a GET past the burst waits its turn."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._tokens = float(BURST)
        self._at = time.monotonic()
        self._told = False

    async def __call__(self, request: httpx2.Request) -> None:
        if request.method != "GET":
            return
        now = time.monotonic()
        self._tokens = min(float(BURST), self._tokens + (now - self._at) * RATE) - 1
        self._at = now
        if self._tokens >= 0:
            return
        if not self._told:
            self._told = True
            logger.warning(
                "server %r has its event streams opened again more than %d times in a row: from now on at "
                "most %g a second (does it end them at once with `retry: 0`?)",
                self.server,
                BURST,
                RATE,
            )
        await anyio.sleep(-self._tokens / RATE)
