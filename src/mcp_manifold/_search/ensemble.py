"""Several embedding models as one: each model's unit vector scaled by sqrt(1/n), concatenated.

The dot product of two such vectors is the mean of the per-model cosines, so the index, fusion,
server profiles and the vector store treat an ensemble like any single model. Averaging two models'
cosines measured +2 NDCG@10 over the better one alone on LiveMCPBench (see docs/search.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mcp_manifold._search.embedder import Embedder, normalise


class EnsembleEmbedder:
    """Embeds with every part; its cosine is the mean of the parts' cosines."""

    def __init__(self, parts: Sequence[Embedder]) -> None:
        if len(parts) < 2:
            raise ValueError(f"an ensemble needs two or more embedders, got {len(parts)}")
        self.parts = tuple(parts)

    @property
    def name(self) -> str:
        # Every part's name, in order: a changed or reordered part is a different vector space.
        return "ensemble(" + "+".join(part.name for part in self.parts) + ")"

    @property
    def dim(self) -> int:
        return sum(part.dim for part in self.parts)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Each block has norm sqrt(1/n), so the whole row has norm 1 (a zero row of a part stays zero).
        scale = np.float32(math.sqrt(1.0 / len(self.parts)))
        blocks = [normalise(part.embed(texts)) * scale for part in self.parts]
        return np.concatenate(blocks, axis=1).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"EnsembleEmbedder({', '.join(map(repr, self.parts))})"
