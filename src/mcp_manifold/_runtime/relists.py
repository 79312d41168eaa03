"""Calls wait while a server that announced a change of its tools is listed again.

A server's `notifications/tools/list_changed` makes the gateway list it again in the background; the
pins judge that listing (a changed tool is quarantined). Without a wait, a call that arrives between
the announcement and the new listing would pass the pin check on the old listing and run the changed
tool. So the announcement marks the server as being re-listed at once (`announced`, called where the
notification is read), and a tool call to it waits for the listing (`settled`) before its pin check:
milliseconds, at most `limit` seconds.

Announcements are counted: a listing ends the wait only if no newer announcement came while it ran
(the re-listing that follows that one ends it).
"""

from __future__ import annotations

import anyio

RELIST_WAIT = 5.0  # seconds a call waits at most for a server's listing after it announced a change


class Relists:
    """The servers being listed again after announcing a change of their tools."""

    def __init__(self, limit: float = RELIST_WAIT, *, hold: bool = False) -> None:
        self.limit = limit
        self.hold = hold  # a call whose wait ran out is refused (pinning: enforce), else it goes ahead
        self._waits: dict[str, anyio.Event] = {}
        self._announced: dict[str, int] = {}  # server -> announcements so far

    def announced(self, server: str) -> None:
        """`server` said its tools changed: calls to it wait from now until it is listed again."""
        self._announced[server] = self._announced.get(server, 0) + 1
        if server not in self._waits:
            self._waits[server] = anyio.Event()

    def begin(self, server: str) -> int:
        """A listing of `server` starts; pass what this returns to `done` when it ends."""
        return self._announced.get(server, 0)

    def done(self, server: str, begun: int) -> None:
        """The listing started at `begun` ended (done or failed): the wait ends unless `server` announced
        another change meanwhile."""
        if self._announced.get(server, 0) != begun:
            return
        wait = self._waits.pop(server, None)
        if wait is not None:
            wait.set()

    def pending(self, server: str) -> bool:
        return server in self._waits

    async def settled(self, server: str) -> bool:
        """Wait until `server` is listed again, if it is being; False when that took longer than `limit`."""
        wait = self._waits.get(server)
        if wait is None:
            return True
        with anyio.move_on_after(self.limit):
            await wait.wait()
            return True
        return False
