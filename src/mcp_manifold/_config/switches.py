"""The environment switches that turn a speed-up off (`MANIFOLD_HTTP_LANE=0`, ...): each speed-up is on
by default and answers alike, and its switch is for benchmarks and for telling whether a problem is the
speed-up's (docs/config.md, "Switches for comparing speed")."""

from __future__ import annotations

import os

from mcp_manifold._config.values import FALSE_WORDS


def speed_up_on(switch: str) -> bool:
    """Whether the speed-up behind environment variable `switch` is on: unless it says 0, false, no or off."""
    return os.environ.get(switch, "1").strip().lower() not in FALSE_WORDS
