"""A program's slot among `code_max_programs`, held for as long as its thread runs.

A program runs on a worker thread its request awaits; a request that is cancelled returns at once and
leaves the thread to end at its next slice. The slot must stay taken until then: before, it was given back
with the request, so starting and cancelling programs ran any number of them at once. Who gives it back
depends on who finishes last: the request (the thread ended first, or never began) or the thread (its
request gave up while it ran). A lock decides, since they run on different threads.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Literal

import anyio
import anyio.from_thread

_State = Literal["waiting", "running", "ended", "abandoned", "given back"]


class ProgramSlot:
    def __init__(self, limiter: anyio.CapacityLimiter, holder: Any) -> None:
        self._limiter = limiter
        self._holder = holder
        self._lock = threading.Lock()
        self._state: _State = "waiting"

    async def take(self) -> None:
        """Wait for a free slot (on the event loop)."""
        try:  # a free slot is taken without a pass of the event loop (the thread's start makes one anyway)
            self._limiter.acquire_on_behalf_of_nowait(self._holder)
        except anyio.WouldBlock:
            await self._limiter.acquire_on_behalf_of(self._holder)

    def begin(self) -> bool:
        """On the worker thread, first: whether the program may run (False: its request gave up already)."""
        with self._lock:
            if self._state == "given back":
                return False
            self._state = "running"
            return True

    def end(self) -> None:
        """On the worker thread, last: gives the slot back if the request gave up while the program ran."""
        with self._lock:
            abandoned = self._state == "abandoned"
            self._state = "given back" if abandoned else "ended"
        if abandoned:
            with contextlib.suppress(RuntimeError):  # the event loop is gone: nobody waits for a slot
                anyio.from_thread.run_sync(self._limiter.release_on_behalf_of, self._holder)

    def free(self) -> None:
        """On the event loop, when the program's outcome came back: its thread has ended."""
        with self._lock:
            self._state = "given back"
        self._limiter.release_on_behalf_of(self._holder)

    def give_up(self) -> None:
        """On the event loop, when the request was cancelled: the slot goes back now if no thread holds it,
        else when the thread ends."""
        with self._lock:
            if self._state == "running":
                self._state = "abandoned"
                return
            if self._state == "given back":
                return
            self._state = "given back"
        self._limiter.release_on_behalf_of(self._holder)
