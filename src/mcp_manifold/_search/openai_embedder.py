"""Embeddings from any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, LM Studio, TEI ...)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from mcp_manifold._search.embedder import normalise
from mcp_manifold._search.errors import EmbedderError
from mcp_manifold._search.http_client import JsonPoster

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """POSTs batches of texts to `{base_url}/embeddings`; the API key defaults to $OPENAI_API_KEY."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        *,
        dimensions: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 128,
    ) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._dimensions = dimensions  # asks the server to shorten vectors (text-embedding-3 models)
        self._batch_size = max(1, batch_size)
        self._dim: int | None = dimensions
        self._poster = JsonPoster(timeout=timeout)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"openai:{self._model}" + (f":{self._dimensions}" if self._dimensions else "")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])  # the API does not say a model's size any other way
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        batches = [
            self._embed_batch(list(texts[i : i + self._batch_size])) for i in range(0, len(texts), self._batch_size)
        ]
        return np.concatenate(batches, axis=0)

    def close(self) -> None:
        self._poster.close()

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self._model, "input": batch, "encoding_format": "float"}
        if self._dimensions:
            payload["dimensions"] = self._dimensions
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        answer = self._poster.post(self._url, payload, headers)
        vectors = normalise(np.asarray(self._parse(answer, len(batch)), dtype=np.float32))
        with self._lock:
            if self._dim is None:
                self._dim = int(vectors.shape[1])
            elif vectors.shape[1] != self._dim:
                raise EmbedderError(f"{self._url} returned {vectors.shape[1]}-d vectors, expected {self._dim}")
        return vectors

    def _parse(self, answer: Any, expected: int) -> list[list[float]]:
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no 'data' list"
            raise EmbedderError(f"{self._url} returned {got} embeddings for {expected} inputs")
        try:
            # Servers may answer out of order; "index" says which input each vector belongs to.
            ordered = sorted(data, key=lambda item: item.get("index", 0))
            return [item["embedding"] for item in ordered]
        except (AttributeError, KeyError, TypeError) as exc:
            raise EmbedderError(f"{self._url} returned a malformed embedding: {exc}") from exc

    def __repr__(self) -> str:
        # Never show the key.
        return f"OpenAIEmbedder(url={self._url!r}, model={self._model!r})"
