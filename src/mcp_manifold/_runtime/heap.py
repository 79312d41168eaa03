"""The garbage collector set for a gateway that has started and now serves for hours.

CPython's cyclic collector runs a young collection each time 700 more container objects exist than
it last saw, and now and then a full one over every object the process holds. A gateway under load
keeps thousands of objects alive in its requests in flight, so it collected the young generation every
dozen calls; and each full collection walked the ~100,000 objects the imports and start-up built (the
SDK's models, the catalog, the search index), a pause of tens of milliseconds every two seconds or
so. Measured over HTTP (docs/benchmarks.md): 4.5 % of the gateway's CPU, none of it freeing anything
(calls make no reference cycles: a collection under load found no garbage).

So once the gateway has started, what start-up built is frozen (`gc.freeze`: never scanned again, never
freed, as it lives until the process ends anyway), and the young generation is collected after 10,000
new objects instead of 700: the cyclic garbage a gateway makes is rare, and what little there is waits
a moment longer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000  # new container objects between young collections (CPython's default is 700)


def settle_after_start() -> None:
    """Freeze what start-up built and collect the young generation less often from now on. (No collection
    first: it would add tens of milliseconds to every start, for the little garbage imports leave.)"""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, old)
