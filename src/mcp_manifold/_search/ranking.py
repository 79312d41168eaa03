"""How a document becomes BM25 terms and an embedding text, and how a query's scores are fused.

`RankingConfig` holds every knob the benchmark compares; the defaults are the measured best
(bench/retrieval.py, docs/search.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from mcp_manifold._search.documents import ToolDocument
from mcp_manifold._search.embedder import Embedder
from mcp_manifold._search.fusion import add_server_match, promote, reciprocal_rank, server_context, weighted_sum
from mcp_manifold._search.lexical import LexicalIndex
from mcp_manifold._search.profiles import ProfileIndex
from mcp_manifold._search.query import clauses, destinations, lexical_query
from mcp_manifold._search.terms import tokenize

# Bump when `embedding_text` changes: stored vectors of the old text must not be reused.
EMBEDDING_TEXT_VERSION = 1
# The most of each field of a tool (its name words, description, parameter text, schema details) that
# search reads. A server writes these: one 8 MB description took 20 s to index, again at every rebuild
# of the index, and 27 s to embed. Real descriptions are a few thousand characters, and the local
# model reads the first 256 tokens only, well inside this, so no vector changes.
MAX_FIELD_CHARS = 20_000


def _field(text: str) -> str:
    return text[:MAX_FIELD_CHARS]


@dataclass(frozen=True)
class RankingConfig:
    # The server and tool name words count this many times in BM25 (a field weight). 3 gained 3 points of
    # NDCG@10 on LiveMCPBench but lost on BFCL's held-out half, so it is off (docs/search.md, "Rule check").
    name_repeat: int = 1
    include_parameters: bool = True  # parameter names and descriptions are BM25 text too
    # Enum values and nested fields of the input schema are BM25 text too (`ToolDocument.schema_details`).
    # +1.7 NDCG@10 on BFCL's held-out half; LiveMCPBench's schemas have neither, so no effect there,
    # and a change is turned on only when it gains on both halves (docs/search.md, "Beyond plain hybrid").
    schema_details: bool = False
    stemming: bool = True
    k1: float = 1.2
    b: float = 0.75
    rewrite_query: bool = True  # paths and URLs in the query → "file <ext>" / "url <site>"
    output_paths: bool = True  # a path the request saves to → "write file <ext>" (needs rewrite_query)
    fusion: Literal["weighted", "rrf", "dense"] = "weighted"
    dense_weight: float = 0.6  # share of the dense side in either fusion
    rrf_k: float = 60.0
    # Also embed each step of a multi-step request (a tool scores its best match). Off: +0.1 NDCG@10
    # (49.2 against 49.1), within noise, for twice the embedding cost.
    query_clauses: bool = False
    server_boost: float = 0.5  # weight of the best sibling tools' score (see fusion.server_context)
    server_match: float = 0.3  # weight of the server profile's match (see profiles.py)
    # A request that saves to a path: the tool that best matches "write file <ext>" takes this place
    # in the ranking if it is not higher already (0: off; needs rewrite_query and output_paths).
    # Off: with name words counted once its gain on LiveMCPBench was gone (the held-out half scored 0.5
    # better without it) and BFCL has no destinations; 2 or 3 put the writer in that place.
    destination_slot: int = 0


def document_terms(doc: ToolDocument, config: RankingConfig) -> list[str]:
    """BM25 terms of a document: name words repeated (they are the densest signal), description, parameters."""
    terms = tokenize(_field(doc.name_words()), stemming=config.stemming) * config.name_repeat
    terms += tokenize(_field(doc.description), stemming=config.stemming)
    if config.include_parameters:
        terms += tokenize(_field(doc.parameters_text()), stemming=config.stemming)
    if config.schema_details:
        terms += tokenize(_field(doc.schema_details()), stemming=config.stemming)
    return terms


def schema_only_terms(doc: ToolDocument, config: RankingConfig) -> list[str]:
    """The BM25 terms a document has only because of `schema_details` (none when that is off)."""
    if not config.schema_details:
        return []
    plain = set(document_terms(doc, replace(config, schema_details=False)))
    details = tokenize(_field(doc.schema_details()), stemming=config.stemming)
    return [t for t in dict.fromkeys(details) if t not in plain]


def embedding_text(doc: ToolDocument) -> str:
    """What the embedder sees: name words and description. Parameter text made vectors worse (it
    drowns a short description in argument details), though BM25 gains from it."""
    description = " ".join(_field(doc.description).split())
    name = _field(doc.name_words())
    return f"{name}: {description}" if description else name


def _rewrite(text: str, config: RankingConfig) -> str:
    return lexical_query(text, output_paths=config.output_paths) if config.rewrite_query else text


def query_terms(query: str, config: RankingConfig) -> list[str]:
    return tokenize(_rewrite(query, config), stemming=config.stemming)


def query_texts(query: str, config: RankingConfig) -> list[str]:
    """Texts to embed for a query: the whole request, plus each of its steps when it has several."""
    steps = clauses(query) if config.query_clauses else []
    texts = [query, *steps] if len(steps) > 1 else [query]
    return [_rewrite(t, config) for t in texts]


def dense_scores(matrix: np.ndarray, has_vector: np.ndarray, query_vectors: np.ndarray) -> np.ndarray:
    """Cosine of each document to its best-matching query text; NaN where a document has no vector."""
    scores = (matrix @ query_vectors.T).max(axis=1).astype(np.float64)
    scores[~has_vector] = np.nan
    return scores


def fuse(lexical: np.ndarray, dense: np.ndarray, config: RankingConfig) -> np.ndarray:
    if config.fusion == "dense":
        return np.where(np.isnan(dense), 0.0, dense + 1.0)  # +1: cosines are in [-1, 1], results need > 0
    if config.fusion == "weighted":
        return weighted_sum(lexical, dense, dense_weight=config.dense_weight)
    return reciprocal_rank(lexical, dense, k=config.rrf_k, dense_weight=config.dense_weight)


def score_all(
    query: str,
    lexical_index: LexicalIndex,
    server_ids: np.ndarray,
    embedder: Embedder | None,
    matrix: np.ndarray | None,
    has_vector: np.ndarray | None,
    config: RankingConfig,
    profiles: ProfileIndex | None = None,
    trace: dict[str, Any] | None = None,
) -> np.ndarray:
    """One score per document, in index order; higher is better, 0 means "not a match".

    `profiles` (one row per server number in `server_ids`) adds the server-profile match; without an
    embedder, or when the query is not embedded, profiles are matched by BM25. `trace`, if given, gets
    every step's scores (see `explain.py`).
    """
    trace = {} if trace is None else trace
    terms = query_terms(query, config)
    scores = trace["bm25"] = lexical_index.scores(terms).astype(np.float64)
    trace["terms"] = terms
    query_vectors = None
    if embedder is not None and matrix is not None and has_vector is not None and has_vector.any():
        query_vectors = embedder.embed(query_texts(query, config))
        trace["dense"] = dense_scores(matrix, has_vector, query_vectors)
        scores = trace["fused"] = fuse(scores, trace["dense"], config)
    scores = trace["server_context"] = server_context(scores, server_ids, weight=config.server_boost)
    if profiles is not None and config.server_match:
        trace["profile_match"] = profiles.match(terms, query_vectors)
        scores = add_server_match(scores, server_ids, trace["profile_match"], weight=config.server_match)
        trace["profiles"] = scores
    if config.destination_slot > 0 and config.rewrite_query and config.output_paths:
        writer = trace["writer"] = destination_tool(query, lexical_index, config)
        if writer is not None:
            scores = promote(scores, writer, config.destination_slot)
    return scores


def destination_tool(query: str, lexical_index: LexicalIndex, config: RankingConfig) -> int | None:
    """The row of the tool that writes what the request saves, or None when it saves nothing or no tool writes.

    A request with a destination has two needs, its subject and the file it ends in, and one ranking of
    the whole request serves the subject: on LiveMCPBench `write_file` ranked below 10th in 14 of the
    18 tasks labelled with it. The last destination is matched by BM25 alone ("write file md"), among
    the tools whose text says "write", so a tool that only reads such files is never promoted.
    """
    wanted = destinations(query)
    if not wanted:
        return None
    scores = lexical_index.scores(tokenize(wanted[-1], stemming=config.stemming)).astype(np.float64)
    scores[lexical_index.scores(tokenize(_WRITE_VERB, stemming=config.stemming)) <= 0] = 0.0
    row = int(np.argmax(scores)) if len(scores) else 0
    return row if len(scores) and scores[row] > 0 else None


_WRITE_VERB = "write"


def stack(vectors: Sequence[np.ndarray | None], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, has_vector) from per-document vectors; missing ones become zero rows."""
    matrix = np.zeros((len(vectors), dim), dtype=np.float32)
    has_vector = np.zeros(len(vectors), dtype=bool)
    for row, vector in enumerate(vectors):
        if vector is not None and vector.shape == (dim,):
            matrix[row] = vector
            has_vector[row] = True
    return matrix, has_vector
