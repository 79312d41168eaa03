"""The garbage collector set for a gateway that has started and now serves for hours.

CPython's cyclic collector runs a young collection each time 700 more container objects exist than
it last saw, and now and then a full one over every object the process holds. A gateway under load
keeps thousands of objects alive in its requests in flight, so it collected the young generation every
dozen calls; and each full collection walked the ~100,000 objects the imports and start-up built (the
SDK's models, the catalog, the search index), a pause of tens of milliseconds every two seconds or
so. Measured over HTTP (docs/benchmarks.md): 4.7 % of the gateway's CPU, none of it freeing anything
(calls make no reference cycles: a collection under load found no garbage).

So once the gateway has started, what start-up built is frozen (`gc.freeze`: never scanned by the
collector again; what reference counting frees is freed as before), and the young generation is
collected after 10,000 new objects instead of 700: the cyclic garbage a gateway makes is rare, and what
little there is waits a moment longer.

What a freeze holds and later becomes cyclic garbage is not freed until the collector may see it again:
the old config and the servers a reload replaced, above all. So `keep_settled` freezes afresh (unfreeze,
one full collection, freeze) every ten minutes, and shortly after each reload, once the servers it
retired have stopped; a reload unfreezes at once.

Only a served gateway (`manifold serve`) does this: a program that embeds the gateway keeps its own
collector settings. `MANIFOLD_GC_FREEZE=0` leaves CPython's settings.
"""

from __future__ import annotations

import gc
import math
import time

import anyio
import anyio.abc

from mcp_manifold._config.switches import speed_up_on

YOUNG_THRESHOLD = 10_000  # new container objects between young collections (CPython's default is 700)
RESETTLE_EVERY = 600.0  # seconds between fresh freezes: the longest a frozen object outlives its use
AFTER_RETIRE = 15.0  # seconds, beyond a reload's shutdown grace, for its retired servers to stop
_WAKE_EVERY = 5.0  # seconds between looks at whether a reload asked for a fresh freeze sooner

_settled = False
_due = math.inf  # when `keep_settled` next freezes afresh (time.monotonic)


def settle_after_start(task_group: anyio.abc.TaskGroup) -> None:
    """Freeze what start-up built, collect the young generation less often from now on, and keep it so in
    `task_group` (`keep_settled`). (No collection first: it would add tens of milliseconds to every
    start; the next fresh freeze frees what little garbage the imports left.)"""
    global _settled, _due
    if not speed_up_on("MANIFOLD_GC_FREEZE"):
        return
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, old)
    _settled = True
    _due = time.monotonic() + RESETTLE_EVERY
    task_group.start_soon(keep_settled)


def reloaded(grace: float) -> None:
    """After a reload, in a settled gateway: the collector sees everything again now, and a fresh freeze
    follows once the servers the reload retired have stopped (`grace`, the shutdown timeout, and a margin)."""
    global _due
    if not _settled:
        return
    gc.unfreeze()
    _due = min(_due, time.monotonic() + grace + AFTER_RETIRE)


def refreeze() -> None:
    """Let the collector see what was frozen, collect it all once, and freeze what survives."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


async def keep_settled() -> None:
    """Freeze afresh when due: every `RESETTLE_EVERY` seconds, and sooner after a reload."""
    global _due
    while True:
        await anyio.sleep(min(max(0.0, _due - time.monotonic()), _WAKE_EVERY))
        if time.monotonic() >= _due:
            refreeze()
            _due = time.monotonic() + RESETTLE_EVERY
