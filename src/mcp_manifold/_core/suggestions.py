"""'Did you mean ...?': the one way every error about an unknown name suggests known ones.

A model (or a person) that misspells a tool, a setting or a field tries again with what the error
suggests, so a suggestion is worth its few tokens. Names that contain what was typed come first
(`echo` for `kitchen_echo`), then close spellings (`multiplyy` for `multiply`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# Longer than any name the gateway shows: quoted shortened, and no one's spelling of a known name.
_LONGEST_QUOTED = 100
LONGEST_URI = 4096  # a URI longer than any the gateway takes (a subscription's bound): quoted shortened


def quoted(name: str, longest: int = _LONGEST_QUOTED) -> str:
    """`name` quoted for an error message; a name longer than any real one (`longest`) is cut, so that an
    error never sends a megabyte of the caller's input back at it."""
    if len(name) <= longest:
        return repr(name)
    return f"{name[:_LONGEST_QUOTED]!r}... ({len(name)} characters)"


def shortened(text: str, longest: int) -> str:
    """`text` as a record keeps it: whole up to `longest` characters, else its start and its length, so that
    a name a caller made up (a refused one is recorded) costs the audit log and the dashboard a few KB at
    most, not the megabytes it sent."""
    if len(text) <= longest:
        return text
    return f"{text[:longest]}... ({len(text)} characters)"


def close_names(name: str, known: Iterable[str], *, limit: int = 3) -> list[str]:
    """Up to `limit` known names the user probably meant by `name`, best first."""
    if len(name) > _LONGEST_QUOTED:
        return []  # not a misspelling; and difflib's work grows with the name's length
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
