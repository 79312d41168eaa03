"""What a session-era client is sent without asking, bounded per client: resource updates, list changes,
and server logs.

Those are sent from tasks that are not the client's own: the one the SDK's client makes for each
notification a server sends, and the one that tells every client of list changes. A client that stopped
reading its stream (a laptop asleep with a session open, or a caller who means it) kept each of those
tasks waiting, holding its message: 300 resource updates of 100 KB to one such client held 56 MB of the
gateway's memory, 1,200 held 244 MB, for as long as its session lived. Now a client is sent them one at
a time, in order; once one has waited `SLOW` seconds to be taken, what comes next for that client is
dropped, and if it is still not taken after `TAKE_WITHIN` seconds the client is sent nothing for `REST`
seconds, which the log says. A client that reads takes each at once, so a burst (a server's twenty log
lines) only queues; a client that does not read would not have seen what is dropped, and one that reads
again is sent what comes next.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

logger = logging.getLogger(__name__)

SLOW = 1.0  # seconds a message may wait to be taken before what comes next for that client is dropped
TAKE_WITHIN = 5.0  # seconds a client has to take a message
REST = 10.0  # seconds a client that took none is sent nothing


class UnaskedSends:
    """One client's unasked messages: sent one at a time; dropped while one waits long or the client rests."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._sending_since: float | None = None  # when the message being sent now was handed over
        self._resting_until = 0.0
        self._dropped = 0

    async def send(self, send: Callable[[], Awaitable[None]], client: str) -> None:
        """`send()` the message, or drop it (see the module); `client` names the client in the log."""
        now = time.monotonic()
        stuck = self._sending_since is not None and now - self._sending_since > SLOW
        if stuck or now < self._resting_until:
            self._dropped += 1
            return
        with anyio.move_on_after(TAKE_WITHIN) as deadline:
            async with self._lock:
                self._sending_since = time.monotonic()
                try:
                    await send()
                finally:
                    self._sending_since = None
        if not deadline.cancelled_caught:
            return
        self._dropped += 1
        now = time.monotonic()
        if now >= self._resting_until:  # said once per rest, not by each message that waited
            self._resting_until = now + REST
            logger.warning(
                "client %s took no message in %gs, so it is sent nothing for %gs (%d dropped so far): is it "
                "reading its stream?",
                client,
                TAKE_WITHIN,
                REST,
                self._dropped,
            )
