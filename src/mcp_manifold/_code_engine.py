"""The code surface's JavaScript engine: quickjs-ng's `quickjs` module, or why it cannot be used.

Kept apart from the code surface so that the config check can ask too: `manifold config check` passed a
config with `expose: [code]` that `serve` then refused for want of the engine.
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

from mcp_manifold._errors import InvalidRequest


class EngineMissing(InvalidRequest):
    """The QuickJS engine is not installed (it comes with the `code` extra)."""


@functools.cache  # asking the installed packages takes about 0.4 ms: once per process, not per program
def load_engine() -> Any:
    """The `quickjs` module of quickjs-ng, or a clear error saying how to install it."""
    try:
        import quickjs
    except ImportError as exc:
        raise EngineMissing(
            "the code surface needs the QuickJS engine, which is not installed: "
            "pip install 'mcp-manifold[code]' (or: pip install quickjs-ng)"
        ) from exc
    # Both packages install a module named `quickjs`. The older one's regular expressions never look at the
    # time limit, so a program's `/(a+)+$/` ran for hours past `code_timeout`, holding its slot.
    if _installed("quickjs") or not _installed("quickjs-ng"):
        raise EngineMissing(
            "the code surface needs the quickjs-ng engine, and the older quickjs package is installed (its "
            "regular expressions ignore the time limit): pip uninstall quickjs && pip install quickjs-ng"
        )
    return quickjs


def engine_problem() -> str | None:
    """Why the code surface could not start here, or None."""
    try:
        load_engine()
    except EngineMissing as exc:
        return str(exc)
    return None


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
