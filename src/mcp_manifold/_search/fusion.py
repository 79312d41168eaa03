"""Combining the lexical (BM25) and dense (embedding) score of every document into one ranking.

Both functions take full score arrays in index order and return one array in the same order, so the
caller can mask (server filter) and cut (limit) once, after fusion. Documents with no dense score
(embedding missing) carry NaN in `dense` and are ranked on BM25 alone.
"""

from __future__ import annotations

import numpy as np

# Beyond this depth a document's rank says little; cutting there keeps RRF from rewarding the long tail.
RRF_DEPTH = 100


def top_indices(scores: np.ndarray, depth: int, *, positive_only: bool = False) -> np.ndarray:
    """Indices of the `depth` best scores, best first; NaN never ranks, nor ≤ 0 when `positive_only`."""
    valid = np.where(np.isnan(scores), -np.inf, scores)
    eligible = valid > 0 if positive_only else np.isfinite(valid)
    depth = min(depth, int(eligible.sum()))
    if depth <= 0:
        return np.empty(0, dtype=np.int64)
    # argpartition first: sorting only the head keeps this O(n) on a 10k catalog.
    head = np.argpartition(-valid, depth - 1)[:depth]
    return head[np.argsort(-valid[head], kind="stable")]


def reciprocal_rank(
    lexical: np.ndarray, dense: np.ndarray, *, k: float = 60.0, dense_weight: float = 0.5
) -> np.ndarray:
    """Weighted reciprocal-rank fusion: Σ wᵢ / (k + rankᵢ) over each list's top `RRF_DEPTH`."""
    fused = np.zeros(len(lexical), dtype=np.float64)
    ranks = 1 + np.arange(RRF_DEPTH)
    lexical_top = top_indices(lexical, RRF_DEPTH, positive_only=True)  # BM25 0 means "no match", not a rank
    dense_top = top_indices(dense, RRF_DEPTH)
    fused[lexical_top] += (1.0 - dense_weight) / (k + ranks[: len(lexical_top)])
    fused[dense_top] += dense_weight / (k + ranks[: len(dense_top)])
    return fused


def weighted_sum(lexical: np.ndarray, dense: np.ndarray, *, dense_weight: float = 0.5) -> np.ndarray:
    """(1-w)·BM25/max(BM25) + w·min-max(dense): BM25 is scaled by its best match, dense by its spread."""
    fused = np.zeros(len(lexical), dtype=np.float64)
    best = float(lexical.max(initial=0.0))
    if best > 0:
        fused += (1.0 - dense_weight) * (lexical / best)
    have = ~np.isnan(dense)
    if have.any():
        lo, hi = float(dense[have].min()), float(dense[have].max())
        fused[have] += dense_weight * (dense[have] - lo) / (hi - lo if hi > lo else 1.0)
    return fused


def server_context(scores: np.ndarray, server_ids: np.ndarray, *, weight: float) -> np.ndarray:
    """scores/max + weight · (mean of the best two scores/max on the same server).

    A request that needs several tools usually needs them from one server ("create a Word document,
    add a heading and a picture"), so a tool gains from strong siblings. Within one server the boost
    is the same for every tool, so their order (and a `server=` filtered search) is unchanged.
    """
    best = float(scores.max(initial=0.0))
    if best <= 0 or weight == 0 or len(scores) == 0:
        return scores
    scaled = scores / best
    order = np.lexsort((-scaled, server_ids))  # by server, best first within each
    grouped = server_ids[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    top1 = scaled[order[starts]]
    nxt = np.minimum(starts + 1, len(order) - 1)
    has_second = (starts + 1 < len(order)) & (grouped[nxt] == grouped[starts])
    top2 = np.where(has_second, (top1 + scaled[order[nxt]]) / 2, top1)
    boost = np.zeros(int(server_ids.max()) + 1)
    boost[grouped[starts]] = top2
    return scaled + weight * boost[server_ids]


def add_server_match(scores: np.ndarray, server_ids: np.ndarray, match: np.ndarray, *, weight: float) -> np.ndarray:
    """scores/max + weight · match[server]: each tool gains what its server's profile matched (see profiles.py).

    Like `server_context`, this adds the same amount to every tool of a server, so a `server=` search
    keeps its order; a search where nothing matched stays all zero.
    """
    best = float(scores.max(initial=0.0))
    if best <= 0 or weight == 0 or len(match) == 0:
        return scores
    return scores / best + weight * match[server_ids]


def promote(scores: np.ndarray, row: int, rank: int) -> np.ndarray:
    """`scores` with document `row` raised to place `rank` (1 = first) unless it already ranks there or higher.

    Its new score lies between those of the documents that end up just above and just below it, so every
    other document keeps its score and its order.
    """
    out = np.array(scores, dtype=np.float64)
    ahead = top_indices(out, rank)  # who holds places 1..rank now, best first
    if len(ahead) < rank or row in ahead:
        return out
    below = float(out[ahead[-1]])
    above = float(out[ahead[-2]]) if rank > 1 else below + 1.0
    out[row] = (above + below) / 2 if above > below else np.nextafter(below, np.inf)
    return out
