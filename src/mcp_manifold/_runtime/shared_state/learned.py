"""What the replicas learn about servers, shared: each server's last listing (the warm-start cache) and
whether it asks its client mid-call (then it is reached in a session, see `Backend.asks_mid_call`).

A listing one replica saves goes to a Redis hash under the listing cache's own file name (the server's
name and config fingerprint), and a replica starting up fills its cache from there: its first `tools/list`
is answered at once even on a fresh machine. A listing its cache drops (a server's older config) leaves the
hash too. The servers known to ask mid-call are a Redis set of the same
names; every replica adds what it learns and takes what the others learned, every `INTERVAL` seconds.

While the store is down, each replica learns on its own; what it learned is written when the store is back.
An entry that is not UTF-8 (another writer's, a truncated one) is logged and skipped: it never ends a replica.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import anyio
import anyio.abc

from mcp_manifold._config import ServerConfig
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.learned import fact_key
from mcp_manifold._runtime.listing_cache import ListingCache
from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)

INTERVAL = 2.0


def server_key(backend: Backend) -> str:
    return fact_key(backend.config)


class SharedLearning:
    def __init__(self, store: StateStore, cache: ListingCache, backends: Callable[[], Iterable[Backend]]) -> None:
        self.store = store
        self.cache = cache
        self.backends = backends
        self.listings_key = store.key("listings")
        self.asking_key = store.key("asks-mid-call")
        self._listings: dict[str, str] = {}  # saved here, not yet written to the store
        self._dropped: set[str] = set()  # dropped here (a server's older configs), not yet from the store
        self._told: set[str] = set()  # servers this replica has put in the set
        self._skipped: set[tuple[str, bytes]] = set()  # entries logged as unreadable (each once, not every round)
        self._forgotten: set[str] = set()  # servers gone for good here, not yet taken out of the set
        cache.on_save = self._saved
        cache.on_drop = self._dropped_here

    def _saved(self, name: str, text: str) -> None:
        self._listings[name] = text
        self._dropped.discard(name)

    def forget(self, config: ServerConfig) -> None:
        """A server is gone for good (a hub instance under a generated id): out of the set at the next exchange, as
        out of learned.json now. Before, the set kept one entry per such instance for good."""
        self._forgotten.add(fact_key(config))

    def _dropped_here(self, names: list[str]) -> None:
        for name in names:
            self._listings.pop(name, None)
            self._dropped.add(name)

    async def prefetch(self) -> None:
        """Fill the local listing cache with what every replica saved (before the first listing is needed)."""
        try:
            saved = await self.store.run("listing cache", lambda: self.store.client.hgetall(self.listings_key))
            for name, text in saved.items():
                entry = self._text(name, self.listings_key), self._text(text, f"{self.listings_key} {_shown(name)}")
                if entry[0] is not None and entry[1] is not None:
                    self.cache.put(entry[0], entry[1])
        except StateUnavailable:
            pass
        except Exception:  # the cache is only a head start: a replica starts without it rather than not at all
            logger.exception("could not read the shared listing cache")

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await anyio.sleep(INTERVAL)
            try:
                await self._exchange()
            except StateUnavailable:
                pass
            except Exception:  # the next round tries again: what is learned never ends the gateway
                logger.exception("could not exchange what the replicas learned about servers")

    async def _exchange(self) -> None:
        if self._listings:
            listings = dict(self._listings)
            await self.store.run("listing cache", lambda: self.store.client.hset(self.listings_key, mapping=listings))
            for name, text in listings.items():
                if self._listings.get(name) == text:
                    del self._listings[name]
        if self._dropped:
            dropped = list(self._dropped)
            await self.store.run("listing cache", lambda: self.store.client.hdel(self.listings_key, *dropped))
            self._dropped.difference_update(dropped)
        if self._forgotten:
            forgotten = list(self._forgotten)
            await self.store.run("learned facts", lambda: self.store.client.srem(self.asking_key, *forgotten))
            self._forgotten.difference_update(forgotten)
            # Never put back from here: a client's own session to the instance lives on until the client goes.
            self._told.update(forgotten)
        backends = list(self.backends())
        learned = {server_key(backend) for backend in backends if backend.needs_session} - self._told
        if learned:
            await self.store.run("learned facts", lambda: self.store.client.sadd(self.asking_key, *learned))
            self._told |= learned
        self._told &= {server_key(backend) for backend in backends}  # of the servers reached now: it stays bounded
        asking = {self._text(name, self.asking_key) for name in await self.store.run("learned facts", self._members)}
        for backend in backends:
            if not backend.needs_session and server_key(backend) in asking:
                backend.learn_needs_session()
                self._told.add(server_key(backend))

    async def _members(self) -> set[bytes]:
        return await self.store.client.smembers(self.asking_key)

    def _text(self, value: bytes | str, where: str) -> str | None:
        """`value` as text; None (logged, once) when it is not UTF-8."""
        if not isinstance(value, bytes):
            return value
        try:
            return value.decode()
        except UnicodeDecodeError as exc:
            if (where, value) not in self._skipped:
                self._skipped.add((where, value))
                logger.error("skipped an entry of %s that is not UTF-8 (%s): %s", where, exc.reason, _shown(value))
            return None


def _shown(value: bytes | str) -> str:
    shown = value.decode(errors="backslashreplace") if isinstance(value, bytes) else value
    return shown if len(shown) <= 80 else shown[:80] + "..."
