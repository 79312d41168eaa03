"""Search over the gateway's tool catalog: BM25 always, plus embeddings when an embedder is configured.

    index = SearchIndex(embedder=make_embedder("hybrid"), store=IndexStore(data_dir / "search.sqlite"))
    index.update(docs)                      # the full catalog; unchanged tools are not re-embedded
    index.search("create an issue on github", limit=5, server=None)  # → [SearchHit(key, score), ...]

No I/O happens here except the SQLite store and, for the "openai" embedder, HTTP to its endpoint.
"""

from mcp_manifold._search.documents import SearchHit, ToolDocument
from mcp_manifold._search.embedder import EMBEDDER_SETTINGS, Embedder
from mcp_manifold._search.embedders import make_embedder
from mcp_manifold._search.errors import EmbedderError, EmbedderUnavailable, SearchError
from mcp_manifold._search.explain import Explanation
from mcp_manifold._search.index import IndexStatus, SearchIndex, UpdateStats
from mcp_manifold._search.ranking import RankingConfig
from mcp_manifold._search.store import IndexStore
from mcp_manifold._search.terms import split_identifier, tokenize

__all__ = [
    "EMBEDDER_SETTINGS",
    "Embedder",
    "EmbedderError",
    "EmbedderUnavailable",
    "Explanation",
    "IndexStatus",
    "IndexStore",
    "RankingConfig",
    "SearchError",
    "SearchHit",
    "SearchIndex",
    "ToolDocument",
    "UpdateStats",
    "make_embedder",
    "split_identifier",
    "tokenize",
]
