"""Lists of servers short enough for what a client reads at connect time, whatever their number.

Surfaces that hide tools still tell the model what is behind the gateway (an agent that cannot see
a server never searches for it), but a catalog of a hundred servers must not cost a hundred lines.
"""

from __future__ import annotations

from collections.abc import Sequence

# About 100-150 tokens of names: room for a few dozen servers before the tail is counted, not named.
DEFAULT_BUDGET = 480


def bounded_list(parts: Sequence[str], budget: int = DEFAULT_BUDGET, separator: str = ", ") -> str:
    """`parts` joined while they fit in `budget` characters, then "and N more".

    The first part is always shown, so the result can overrun when that part and the count of the
    rest do not fit together.
    """
    shown: list[str] = []
    used = 0
    for index, part in enumerate(parts):
        cost = len(part) + (len(separator) if shown else 0)
        remaining = len(parts) - index
        tail = len(f"{separator}and {remaining} more") if remaining > 1 else 0
        if used + cost + tail > budget and shown:
            return separator.join(shown) + f"{separator}and {remaining} more"
        shown.append(part)
        used += cost
    return separator.join(shown)
