"""The `manifold` command line, one module per command group; `main` is the entry point.

serve; servers and tools (status); call and search (calls); register; config check and import
(config_files); pins; audit; auth.
"""

from __future__ import annotations

import sys
from typing import Any

# Each module registers its commands on the apps in `common` as it is imported, in the order `--help`
# lists them: the gateway first, then what it serves, then its files.
# isort: off
from mcp_manifold._cli import serve, status, calls, register, config_files  # noqa: F401
from mcp_manifold._cli import pins, audit, auth  # noqa: F401

# isort: on
from mcp_manifold._cli.common import app, err
from mcp_manifold._cli.shown import printable
from mcp_manifold._errors import ManifoldError

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except ManifoldError as exc:
        err.print(f"error: {printable(exc, lines=True)}", markup=False)
        sys.exit(1)
    except BaseExceptionGroup as group:
        # Task groups wrap what the gateway raised; our own errors still deserve a plain message.
        ours, rest = group.split(ManifoldError)
        if ours is None or rest is not None:
            raise
        for exc in _leaves(ours):
            err.print(f"error: {printable(exc, lines=True)}", markup=False)
        sys.exit(1)


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found
