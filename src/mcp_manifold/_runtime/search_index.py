"""The search index kept in step with the catalog, shared by every surface that searches.

Built on first use (surfaces that never search cost nothing), persisted under the data dir so a
restart neither re-embeds nor re-indexes unchanged tools, and updated from the catalog's change
events.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio

from mcp_manifold._config import Settings
from mcp_manifold._core.catalog import Catalog, Kind, Match, ToolEntry
from mcp_manifold._files import private_dir
from mcp_manifold._search import IndexStore, SearchHit, SearchIndex, ToolDocument, make_embedder
from mcp_manifold._search.errors import EmbedderUnavailable

logger = logging.getLogger(__name__)

# A tool a client's own session lists otherwise than the shared one (`session_scope: client`: a server that
# lists a sampling tool only to clients that can sample) is indexed beside the shared one as
# `name` VARIANT `its content hash`, ranked for that client only.
VARIANT = "\x00"
# Clients' own versions kept in the index at most; past it, only the searching client's are kept.
MAX_VARIANTS = 2000


def _name(key: str) -> str:
    """The exposed tool name of an index key (a client's own version's too)."""
    return key.partition(VARIANT)[0]


def tool_document(entry: ToolEntry) -> ToolDocument:
    return ToolDocument(
        key=entry.name,
        server=entry.server,
        name=entry.original.name,
        description=entry.exposed.description or "",
        input_schema=entry.exposed.input_schema,
    )


def _embedder_options(settings: Settings) -> dict[str, object]:
    if settings.search_embedder == "hybrid" and settings.search_models:
        return {"models": list(settings.search_models)}
    if settings.search_embedder != "openai":
        return {}
    options: dict[str, object] = {"model": settings.openai_model}
    if settings.openai_base_url:
        options["base_url"] = settings.openai_base_url
    if os.environ.get("OPENAI_API_KEY"):
        options["api_key"] = os.environ["OPENAI_API_KEY"]
    return options


class CatalogSearch:
    """A `SearchIndex` over `catalog`, refreshed whenever the catalog's tools change."""

    def __init__(self, catalog: Catalog, settings: Settings) -> None:
        self.catalog = catalog
        self.settings = settings
        data_dir = Path(settings.data_dir).expanduser()
        private_dir(data_dir)
        # Why the configured embedder is not in use, if it is not (shown by `manifold search`).
        self.embedder_unavailable: str | None = None
        try:
            embedder = make_embedder(settings.search_embedder, **_embedder_options(settings))
        except EmbedderUnavailable as exc:
            # A missing optional extra must not take search down: BM25 alone still answers well.
            self.embedder_unavailable = str(exc)
            logger.warning("%s; searching with BM25 alone", exc)
            embedder = None
        self.index = SearchIndex(embedder=embedder, store=IndexStore(data_dir / "search.sqlite"))
        self._stale = True
        self._first_update: anyio.Event | None = None
        self._updating = False  # a `find` is bringing the index up to date (read and set on the event loop)
        self._variants: dict[str, ToolDocument] = {}  # clients' own versions of tools, by key (read on the loop)
        catalog.subscribe(self._on_change)

    def _on_change(self, kinds: set[Kind]) -> None:
        if "tools" in kinds:
            self._stale = True

    def _pending_documents(self) -> list[ToolDocument] | None:
        """The catalog's tools as documents if they changed since the last sync, else None."""
        if not self._stale:
            return None
        self._stale = False
        return [*(tool_document(entry) for entry in self.catalog.tool_entries()), *self._variants.values()]

    def _matches(self, hits: list[SearchHit], catalog: Catalog | None = None) -> list[Match]:
        """The hits that name a listed tool now. The index may be older than the catalog (an update is running):
        by `listed_entry`, never `entry`, so a tool its server has since made for its app only is not answered
        (`has_tool` knows those too: a search during an update showed one to the model)."""
        catalog = catalog or self.catalog
        found = ((catalog.listed_entry(_name(hit.key)), hit.score) for hit in hits)
        return [Match(entry, score) for entry, score in found if entry is not None]

    def _own_documents(self, catalog: Catalog) -> dict[str, ToolDocument]:
        """The tools a client's own catalog has otherwise than the shared one (or only it has), by variant key."""
        apart = set(catalog.servers_listed_apart(self.catalog))
        own: dict[str, ToolDocument] = {}
        for entry in catalog.tool_entries() if apart else []:
            if entry.server not in apart:
                continue
            doc = tool_document(entry)
            shared = self.catalog.listed_entry(entry.name)  # what the index holds under that name
            if shared is None or tool_document(shared) != doc:
                key = f"{entry.name}{VARIANT}{doc.content_hash()[:16]}"
                own[key] = replace(doc, key=key)
        return own

    def _allowed_in(
        self, catalog: Catalog | None, allowed: Callable[[str], bool] | None
    ) -> tuple[Callable[[str], bool] | None, Catalog | None]:
        """Which index keys a caller searching `catalog` (None: the shared one) ranks: its own versions of tools
        where it has them, the shared ones elsewhere, never another client's; and the catalog its hits name."""
        if catalog is None or catalog is self.catalog:
            if not self._variants:
                return allowed, None
            return (lambda key: VARIANT not in key and (allowed is None or allowed(key))), None
        own = self._own_documents(catalog)
        if any(key not in self._variants for key in own):
            if len(self._variants) + len(own) > MAX_VARIANTS:
                self._variants = {}
            self._variants.update(own)
            self._stale = True
        mine = set(own)
        shadowed = {_name(key) for key in own}
        names = allowed or {entry.name for entry in catalog.tool_entries()}.__contains__
        return (lambda key: (key in mine if VARIANT in key else key not in shadowed) and names(_name(key))), catalog

    def sync(self) -> None:
        """Bring the index up to date with the catalog (cheap when nothing changed)."""
        docs = self._pending_documents()
        if docs is not None:
            self.index.update(docs)

    def search(self, query: str, *, limit: int, server: str | None = None) -> list[Match]:
        self.sync()
        return self._matches(self.index.search(query, limit=limit, server=server))

    async def find(
        self,
        query: str,
        *,
        limit: int,
        server: str | None = None,
        allowed: Callable[[str], bool] | None = None,
        catalog: Catalog | None = None,
    ) -> list[Match]:
        """`search` from async code: indexing and query embedding run in a worker thread.

        With an embedder, the first sync of a large catalog takes seconds to minutes and every query
        costs an embedding; on the event loop that would stall every other session of the gateway.
        The catalog is read on the loop; the index is thread-safe and answers from its previous state
        while an update runs. `allowed` (a caller's profile) keeps what it may not call out of the ranking.

        One update at a time: a change that comes while one runs waits for the first search after it,
        which takes the catalog as it is then. Each search that saw a change used to start an update of
        its own, queued behind the running one: a server whose list kept changing had searches wait
        minutes for lists that were gone by then, each embedded in turn.

        `catalog` is the caller's when it has sessions of its own to some servers (`Gateway.catalog_for`):
        what those sessions list is what it finds.
        """
        allowed, catalog = self._allowed_in(catalog, allowed)
        docs = None if self._updating else self._pending_documents()
        if docs is None:
            if self._first_update is not None and len(self.index) == 0:
                await self._first_update.wait()  # nothing to answer from yet: wait for the first index
            hits = await anyio.to_thread.run_sync(
                lambda: self.index.search(query, limit=limit, server=server, allowed=allowed)
            )
            return self._matches(hits, catalog)
        updated = anyio.Event()
        self._first_update = self._first_update or updated
        self._updating = True

        def work() -> list[SearchHit]:
            try:
                self.index.update(docs)
            except BaseException:
                self._stale = True  # try again on the next search
                raise
            return self.index.search(query, limit=limit, server=server, allowed=allowed)

        try:
            return self._matches(await anyio.to_thread.run_sync(work), catalog)
        finally:
            self._updating = False
            updated.set()
