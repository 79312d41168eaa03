"""'Did you mean ...?': the one way every error about an unknown name suggests known ones.

A model (or a person) that misspells a tool, a setting or a field tries again with what the error
suggests, so a suggestion is worth its few tokens. Names that contain what was typed come first
(`echo` for `kitchen_echo`), then close spellings (`multiplyy` for `multiply`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(name: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """Up to `limit` known names the user probably meant by `name`, best first."""
    candidates = list(dict.fromkeys(known))
    lowered = name.lower()
    containing = [candidate for candidate in candidates if lowered and lowered in candidate.lower()]
    similar = difflib.get_close_matches(name, candidates, n=limit)
    return list(dict.fromkeys([*containing, *similar]))[:limit]


def did_you_mean(name: str, known: Iterable[str], *, limit: int = 3) -> str:
    """`; did you mean 'x'?` (or `'x', 'y' or 'z'`) to append to an error, or `` when nothing is close."""
    close = close_names(name, known, limit=limit)
    if not close:
        return ""
    quoted = [repr(candidate) for candidate in close]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"; did you mean {listed}?"
