"""Keeping the catalog in step with the backends: list them, re-list them, answer early from the cache.

The first need of a lazy start lists every backend not listed yet (`ensure_catalog`). A serving
gateway first fills the catalog from each backend's last listing on disk (`ListingCache`) and re-lists
the backend behind it, so a desktop client's first `tools/list` is answered at once; eager backends
are started the same way when it starts (`start_eager`), never holding back its `initialize`; when the real
listing differs, the catalog's change event tells the clients. One backend's failure leaves the others
untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._core.catalog import Catalog
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.naming import sanitize_prefix
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.listing_cache import ListingCache
from mcp_manifold._runtime.pool import BackendPool

logger = logging.getLogger(__name__)

BACKGROUND_STARTS = 2  # servers re-listed (so started) at once behind a catalog the listing cache filled
# How long those re-listings wait after the cached answer: a client's first call usually follows its
# listing at once, and the server it needs then starts on idle cores instead of beside two others.
BACKGROUND_PAUSE = 1.0
BACKGROUND_YIELD = 10.0  # the longest they give way to a call's server (one that hangs must not hold them)


class CatalogSync:
    """Lists backends into the catalog, from the listing cache first when the gateway is serving."""

    def __init__(
        self,
        pool: BackendPool,
        catalog: Catalog,
        cache: ListingCache,
        *,
        serving: bool,
        on_listing: Callable[[str, Listing], object] | None = None,
    ) -> None:
        self.pool = pool
        self.on_listing = on_listing  # sees each listing before the catalog does (the pins)
        self.catalog = catalog
        self.cache = cache
        self.serving = serving
        self.listed: set[str] = set()
        self.live: set[str] = set()  # listed by the server itself, not only from the listing cache
        self._starting: dict[str, anyio.Event] = {}  # eager backends being started in the background
        self._lock = anyio.Lock()
        self._background = anyio.CapacityLimiter(BACKGROUND_STARTS)
        self._in_background: set[str] = set()  # backends a background re-listing is starting
        self._warned: dict[str, str] = {}  # the last failure logged per backend, so a retry does not repeat it
        self._task_group: anyio.abc.TaskGroup | None = None
        self._remembered: set[str] = set()  # servers whose cached extensions were looked up

    def attach(self, task_group: anyio.abc.TaskGroup) -> None:
        """Where background re-listings run (the gateway's task group)."""
        self._task_group = task_group

    async def ensure_catalog(self) -> None:
        """Start and list every enabled backend not listed yet (the first need of a lazy start)."""
        missing = [
            backend.name
            for backend in self.pool
            if backend.name not in self.listed and backend.state != "disabled" and not in_backoff(backend)
        ]
        if self.serving:
            missing = [name for name in missing if not self._list_from_cache(name)]
        # An eager backend already starting in the background: wait for that start, not a second listing.
        starting = [self._starting[name] for name in missing if name in self._starting]
        missing = [name for name in missing if name not in self._starting]
        if missing:
            await self.refresh(missing)
        for started in starting:
            await started.wait()

    def start_eager(self, names: list[str]) -> None:
        """Start eager (`lazy: false`) backends behind a serving gateway, as lazy ones are started.

        Those with a cached listing are in the catalog at once; the others are listed when they are up.
        Nothing waits here, so one slow or hung server never holds back the gateway's `initialize`.
        """
        assert self._task_group is not None, "attach() first"
        for name in names:
            if not self._list_from_cache(name):
                self._starting[name] = anyio.Event()
                self._task_group.start_soon(self._start_one, name)

    async def _start_one(self, name: str) -> None:
        self._in_background.add(name)  # nobody's call is waiting for it: the cached ones need not wait for it
        try:
            await self.refresh_contained(name)
        finally:
            self._in_background.discard(name)
            self._starting.pop(name).set()

    def extensions(self) -> list[dict[str, Any] | None]:
        """The extensions each enabled server declared: as it runs, else as its cached listing remembers
        (a server not started yet, under `serve`), so a client's first `initialize` hears of them."""
        found = []
        for backend in self.pool:
            if backend.extensions is None and self.serving and backend.name not in self._remembered:
                self._remembered.add(backend.name)
                listing = self.cache.load(backend.config) if backend.state != "disabled" else None
                backend.extensions = listing.extensions if listing is not None else None
            found.append(backend.extensions)
        return found

    def _list_from_cache(self, name: str) -> bool:
        """Fill the catalog from `name`'s cached listing and re-list it in the background."""
        listing = self.cache.load(self.pool[name].config)
        if listing is None or self._task_group is None:
            return False
        self._set(name, listing)
        self._task_group.start_soon(self._refresh_in_background, name)
        return True

    async def _refresh_in_background(self, name: str) -> None:
        """Re-list a backend the cache answered for, a few at a time, and only while no call is starting a
        server it needs: thirty servers started at once on two cores would make a call wait its turn for the
        one it needs (which the call starts at once itself)."""
        await anyio.sleep(BACKGROUND_PAUSE)
        async with self._background:
            with anyio.move_on_after(BACKGROUND_YIELD):
                while any(b.state == "starting" and b.name not in self._in_background for b in self.pool):
                    await anyio.sleep(0.05)
            self._in_background.add(name)
            try:
                await self.refresh_contained(name)
            finally:
                self._in_background.discard(name)

    async def refresh(self, names: list[str]) -> None:
        """(Re)list the named backends concurrently; a failure leaves the others untouched."""
        async with anyio.create_task_group() as task_group:
            for name in names:
                task_group.start_soon(self.refresh_contained, name)

    async def relist(self, backend: Backend) -> None:
        """The server said its lists changed: list it again, unless a config reload removed or replaced it
        meanwhile (it announced while a call of its was draining): its listing is nobody's then."""
        if self.pool.backends.get(backend.name) is not backend:
            logger.debug("server %r announced a change after a config reload retired it: ignored", backend.name)
            return
        await self.refresh_contained(backend.name)

    async def refresh_contained(self, name: str) -> None:
        """Every listing runs here. They run in task groups every caller shares (the gateway's, the back
        channel's), where one escaping exception would cancel the whole group: a fault ends this listing only."""
        try:
            await self.refresh_one(name)
        except Exception:
            logger.exception("server %r: listing it failed; the catalog keeps what it showed", name)

    def not_running(self, name: str, separator: str, may_use_server: Callable[[str], bool]) -> str | None:
        """Why a tool called `name` may be missing: a server the caller may use, which could own that name,
        is not listed because it failed to start (with its reason). None when no such server explains it."""
        for backend in self.pool:
            prefix = backend.config.exposed_prefix
            could_own = not prefix or name.startswith(sanitize_prefix(prefix) + separator)
            failed = backend.state == "failed" and backend.last_error and backend.name not in self.live
            if could_own and failed and may_use_server(backend.name):
                reason = backend.last_error.removeprefix(f"server {backend.name!r}: ")
                return f"its server {backend.name!r} is not running ({reason})"
        return None

    async def refresh_one(self, name: str) -> None:
        backend = self.pool.backends.get(name)
        if backend is None:  # a config reload removed it while this listing waited its turn
            logger.debug("server %r: not listed: a config reload removed it", name)
            return
        try:
            listing = await backend.list_all()
        except ManifoldError as exc:
            if backend.last_error is not None and self._warned.get(name) == backend.last_error:
                logger.debug("%s", exc)  # still failing as already told (a start attempt held by its backoff)
            else:
                logger.warning("%s", exc)
                self._warned[name] = backend.last_error or str(exc)
            return
        async with self._lock:
            if self.pool.backends.get(name) is not backend:
                return  # a config reload removed or replaced it meanwhile: this listing is stale
            self._set(name, listing)
            self.live.add(name)
        if self.serving:
            self.cache.save(backend.config, listing)

    def forget(self, name: str) -> None:
        """A config reload removed the server: its items leave the catalog (clients get list_changed)."""
        self.listed.discard(name)
        self.live.discard(name)
        self._remembered.discard(name)  # one put back under this name may declare other extensions
        self._warned.pop(name, None)
        self.cache.drop(name)
        self.catalog.remove_backend(name)

    def unsettle(self, name: str) -> None:
        """A config reload restarted or reconfigured the server: its listing shown now is about to change."""
        self.live.discard(name)

    def starting(self) -> bool:
        """Whether an eager server is still being started and listed for the first time."""
        return bool(self._starting)

    def settled(self) -> bool:
        """Whether every enabled server has been listed by itself and none is failing: until then the
        catalog may change soon (a cached listing being refreshed, a server still to come back)."""
        return all(
            backend.name in self.live and backend.state != "failed"
            for backend in self.pool
            if backend.state != "disabled"
        )

    def _set(self, name: str, listing: Listing) -> None:
        config = self.pool[name].config
        if self.on_listing is not None:
            self.on_listing(name, listing)
        self.catalog.set_backend(name, listing, prefix=config.exposed_prefix, tool_filter=config.tools.allows)
        self.listed.add(name)


def in_backoff(backend: Backend) -> bool:
    """Whether a failed backend is still waiting out its restart backoff (starting it now would fail)."""
    return backend.state == "failed" and (backend.status().retry_in or 0) > 0
