"""The garbage collector set for a gateway that has started and now serves for hours.

CPython's cyclic collector runs a young collection each time 700 more container objects exist than
it last saw, and now and then a full one over every object the process holds. A gateway under load
keeps thousands of objects alive in its requests in flight, so it collected the young generation every
dozen calls; and each full collection walked the ~100,000 objects the imports and start-up built (the
SDK's models, the catalog, the search index), a pause of tens of milliseconds every two seconds or
so. Measured over HTTP (docs/benchmarks.md): 4.5 % of the gateway's CPU, none of it freeing anything
(calls make no reference cycles: a collection under load found no garbage).

So once the gateway has started, what start-up built is frozen (`gc.freeze`: never scanned by the
collector again; what reference counting frees is freed as before), and the young generation is
collected after 10,000 new objects instead of 700: the cyclic garbage a gateway makes is rare, and what
little there is waits a moment longer. A reload replaces some of what was frozen (the old config, the
servers it removed), which may hold cycles the collector must see: each reload unfreezes everything,
collects once (one pause of that length, per reload) and freezes what survives, so at most one reload's
leftovers are ever held.

Only a served gateway (`manifold serve`) does this: a program that embeds the gateway keeps its own
collector settings. `MANIFOLD_GC_FREEZE=0` leaves CPython's settings.
"""

from __future__ import annotations

import gc

from mcp_manifold._config.switches import speed_up_on

YOUNG_THRESHOLD = 10_000  # new container objects between young collections (CPython's default is 700)

_settled = False


def settle_after_start() -> None:
    """Freeze what start-up built and collect the young generation less often from now on. (No collection
    first: it would add tens of milliseconds to every start, for the little garbage imports leave.)"""
    global _settled
    if not speed_up_on("MANIFOLD_GC_FREEZE"):
        return
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, old)
    _settled = True


def settle_after_reload() -> None:
    """After a reload, in a settled gateway: let the collector see what was frozen, collect, freeze again."""
    if not _settled:
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()
