"""The query adapter's training (bench/retrieval.py ``--train-adapter``), tried for issue 26 and dropped.

The adapter is not part of the package (docs/search.md, "Second round": its held-out gain was on tools
the tuning requests were labelled with), but the benchmark keeps the code that trains and measures
it, so the figures in the docs can be reproduced; this checks that the training does what it says.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _retrieval_bench() -> Any:
    """bench/retrieval.py as a module (bench/ is scripts, not a package)."""
    path = Path(__file__).resolve().parent.parent / "bench" / "retrieval.py"
    spec = importlib.util.spec_from_file_location("retrieval_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _reworded(rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """8 orthonormal tool vectors and 40 requests, request i pointing mostly at tool (i + 1) % 8 but
    labelled with tool i % 8: a consistent rewording that a matrix can learn."""
    tools = np.linalg.qr(rng.normal(size=(16, 16)))[0][:8].astype(np.float32)
    requests = 0.9 * tools[(np.arange(40) + 1) % 8] + 0.3 * tools[np.arange(40) % 8]
    requests += 0.05 * rng.normal(size=requests.shape).astype(np.float32)
    requests /= np.linalg.norm(requests, axis=1, keepdims=True)
    return requests, [np.array([i % 8]) for i in range(40)], tools


def test_training_moves_requests_towards_their_labelled_tools() -> None:
    bench = _retrieval_bench()
    requests, labels, tools = _reworded(np.random.default_rng(3))
    wanted = np.arange(40) % 8
    assert ((requests @ tools.T).argmax(axis=1) == wanted).mean() == 0.0
    matrix = bench.train_query_adapter([(requests, labels, tools)], pull=0.01, scale=20.0, steps=200, rate=1.0)
    assert ((requests @ matrix.T @ tools.T).argmax(axis=1) == wanted).mean() == 1.0
    # A strong pull towards the identity keeps the matrix where the data say little.
    held = bench.train_query_adapter([(requests, labels, tools)], pull=100.0, scale=20.0, steps=50, rate=0.005)
    assert np.abs(held - np.eye(16)).max() < 0.05


class _Fixed:
    """An embedder with one fixed vector per text."""

    name, dim = "test:fixed", 2

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def test_only_the_benchmark_requests_go_through_the_adapter() -> None:
    bench = _retrieval_bench()
    inner = _Fixed({"request": [1.0, 0.0], "tool": [1.0, 0.0]})
    swap = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    adapted = bench.QueryAdapted(inner, swap, {"request"})
    assert adapted.name == inner.name  # the same vector space: stored tool vectors are reused
    np.testing.assert_allclose(adapted.embed(["tool", "request"]), [[1.0, 0.0], [0.0, 1.0]])
