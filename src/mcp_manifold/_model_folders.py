"""What counts as a usable `search_models` entry: the bundled model, or a model folder on disk.

Kept apart from the search package, whose import brings numpy and bm25s, so that checking a config
costs nothing.
"""

from __future__ import annotations

from pathlib import Path

BUNDLED = "minilm"  # the entry that means the bundled all-MiniLM-L6-v2 (search/model/, see hatch_build.py)
# A folder is a model when it has one of these: modules.json (sentence-transformers) or config.json
# (a plain transformers model, which sentence-transformers mean-pools).
MODEL_MARKERS = ("modules.json", "config.json")


def model_folder_problem(entry: str) -> str | None:
    """Why `entry` (a `search_models` item) is not usable, or None."""
    if entry.strip().lower() == BUNDLED:
        return None
    folder = Path(entry)
    if not folder.is_dir():
        return f"{entry!r} is neither {BUNDLED!r} nor an existing directory"
    if not any((folder / marker).is_file() for marker in MODEL_MARKERS):
        return f"{entry!r} is not a model folder: it has no {' or '.join(MODEL_MARKERS)}"
    return None
