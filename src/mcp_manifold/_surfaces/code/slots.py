"""A program's slot among `code_max_programs`, held for as long as its thread runs, and handed out fairly.

A program runs on a worker thread its request awaits; a request that is cancelled returns at once and
leaves the thread to end at its next slice. The slot must stay taken until then: before, it was given back
with the request, so starting and cancelling programs ran any number of them at once. Who gives it back
depends on who finishes last: the request (the thread ended first, or never began) or the thread (its
request gave up while it ran). A lock decides, since they run on different threads.

Slots that come free go to the principals waiting in turn (`FairSlots`): in first-come order, one caller
with a backlog of programs made every other caller wait behind all of it.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Hashable
from typing import Literal

import anyio
import anyio.from_thread

_State = Literal["waiting", "running", "ended", "abandoned", "given back"]


class FairSlots:
    """`total` slots; while some wait, each slot that comes free goes to the next principal in turn (the
    longest a principal's program waits is a round of the others', not every program queued before it).
    Used on the event loop only."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.taken = 0
        self._waiting: dict[Hashable, deque[anyio.Event]] = {}  # in turn order: the next served comes first

    async def take(self, principal: Hashable) -> None:
        if self.taken < self.total and not self._waiting:  # taken without a pass of the event loop
            self.taken += 1
            return
        handed = anyio.Event()
        self._waiting.setdefault(principal, deque()).append(handed)
        try:
            await handed.wait()
        except BaseException:
            if handed.is_set():  # handed the slot as it was cancelled: the next in turn has it
                self.give_back()
            else:
                queue = self._waiting[principal]
                queue.remove(handed)
                if not queue:
                    del self._waiting[principal]
            raise

    def give_back(self) -> None:
        if not self._waiting:
            self.taken -= 1
            return
        principal, queue = next(iter(self._waiting.items()))
        del self._waiting[principal]
        handed = queue.popleft()
        if queue:  # its next program waits behind every other principal's
            self._waiting[principal] = queue
        handed.set()  # the slot passes to it still taken


class ProgramSlot:
    def __init__(self, slots: FairSlots, principal: Hashable) -> None:
        self._slots = slots
        self._principal = principal
        self._lock = threading.Lock()
        self._state: _State = "waiting"

    async def take(self) -> None:
        """Wait for a free slot (on the event loop)."""
        await self._slots.take(self._principal)

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
                anyio.from_thread.run_sync(self._slots.give_back)

    def free(self) -> None:
        """On the event loop, when the program's outcome came back: its thread has ended."""
        with self._lock:
            self._state = "given back"
        self._slots.give_back()

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
        self._slots.give_back()
