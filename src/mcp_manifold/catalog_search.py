"""The search index kept in step with the catalog, shared by every surface that searches.

Built on first use (surfaces that never search cost nothing), persisted under the data dir so a
restart neither re-embeds nor re-indexes unchanged tools, and updated from the catalog's change
events.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mcp_manifold.catalog import Catalog, Kind, ToolEntry
from mcp_manifold.config import Settings
from mcp_manifold.search import IndexStore, SearchIndex, ToolDocument, make_embedder


@dataclass(frozen=True)
class Match:
    """One search result: the catalog entry and its score."""

    entry: ToolEntry
    score: float


def tool_document(entry: ToolEntry) -> ToolDocument:
    return ToolDocument(
        key=entry.name,
        server=entry.server,
        name=entry.original.name,
        description=entry.exposed.description or "",
        input_schema=entry.exposed.input_schema,
    )


def _embedder_options(settings: Settings) -> dict[str, object]:
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
        data_dir.mkdir(parents=True, exist_ok=True)
        embedder = make_embedder(settings.search_embedder, **_embedder_options(settings))
        self.index = SearchIndex(embedder=embedder, store=IndexStore(data_dir / "search.sqlite"))
        self._stale = True
        catalog.subscribe(self._on_change)

    def _on_change(self, kinds: set[Kind]) -> None:
        if "tools" in kinds:
            self._stale = True

    def sync(self) -> None:
        """Bring the index up to date with the catalog (cheap when nothing changed)."""
        if self._stale:
            self.index.update(tool_document(entry) for entry in self.catalog.tool_entries())
            self._stale = False

    def search(self, query: str, *, limit: int, server: str | None = None) -> list[Match]:
        self.sync()
        matches = []
        for hit in self.index.search(query, limit=limit, server=server):
            if self.catalog.has_tool(hit.key):
                matches.append(Match(self.catalog.tool(hit.key), hit.score))
        return matches
