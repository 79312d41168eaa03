"""A deliberately light English suffix stemmer.

Tool catalogs are short texts where a query says "issues", "creating" or "translation" and the tool
says "issue", "create" or "translate". Conflating those few inflections is what matters; an
aggressive stemmer (Porter) also merges unrelated words and costs a dependency. The rules only need
to map related forms to the *same* stem, not to a real word: create, creates, created, creating and
creation all become "creat".
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiouy")
_KEEP_DOUBLE = frozenset("lsz")  # install-ing, pass-ed, buzz-ing keep their double letter


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Stem one lowercase word; non-ASCII, non-alphabetic and short words come back unchanged."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    word = _strip_plural(word)
    word = _strip_suffix(word)
    # A final silent e would otherwise keep "create" apart from "creat(ing)".
    if len(word) >= 4 and word.endswith("e"):
        word = word[:-1]
    return word


def _strip_plural(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _strip_suffix(word: str) -> str:
    for suffix in ("ing", "ed"):
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if len(base) >= 3 and _VOWELS & set(base):
                return _undouble(base)
            return word
    if word.endswith("ly") and len(word) >= 6:
        return word[:-2]
    if word.endswith(("tion", "sion")) and len(word) >= 7:
        return word[:-3]
    return word


def _undouble(base: str) -> str:
    # running → run, stopped → stop
    if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in _VOWELS and base[-1] not in _KEEP_DOUBLE:
        return base[:-1]
    return base
