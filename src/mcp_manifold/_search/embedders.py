"""Which embedder a `search_embedder` setting means: one place that knows every implementation."""

from __future__ import annotations

from typing import Any

from mcp_manifold._search.embedder import EMBEDDER_SETTINGS, Embedder


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
