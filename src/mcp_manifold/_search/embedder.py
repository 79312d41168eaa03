"""The `Embedder` protocol and the factory that turns the gateway's `embedder` setting into one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

EMBEDDER_SETTINGS = ("bm25", "hybrid", "openai")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; the same `name` must always mean the same vector space."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A float32 array of shape (len(texts), dim), each row L2-normalised."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32, so a dot product is the cosine."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def make_embedder(settings_name: str, **kwargs: Any) -> Embedder | None:
    """The embedder for a setting: "bm25" → None, "hybrid" → local models, "openai" → HTTP API.

    `kwargs` go to the embedder's constructor (e.g. base_url, model, api_key for "openai"); "hybrid"
    takes `models`, the `search_models` list ("minilm" or model folders; empty: the bundled model).
    """
    setting = settings_name.strip().lower()
    if setting == "bm25":
        if kwargs:
            raise ValueError(f"embedder 'bm25' takes no options, got {sorted(kwargs)}")
        return None
    if setting == "hybrid":
        from mcp_manifold._search.local_embedder import hybrid_embedder

        return hybrid_embedder(**kwargs)
    if setting == "openai":
        from mcp_manifold._search.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(**kwargs)
    raise ValueError(f"unknown embedder {settings_name!r}; expected one of {', '.join(EMBEDDER_SETTINGS)}")
