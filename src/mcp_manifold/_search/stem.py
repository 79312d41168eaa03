"""Plural folding: the one piece of stemming that measured as safe on tool catalogs.

A query says "issues", "repositories", "files"; a tool says "issue", "repository", "file". Folding
those plurals is all this does (the classic "S" rules). Suffix stripping beyond that (-ing, -ed,
-ion, silent e) was tried and lost ranking quality on LiveMCPBench: it merges words a tool catalog
keeps apart ("news"/"new", "settings"/"set"). See docs/search.md.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The singular of an English plural; any other word (non-ASCII, digits, short) comes back unchanged."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"  # queries → query
    if word.endswith(("sses", "ches", "shes", "xes", "zzes")):
        return word[:-2]  # classes → class, matches → match, boxes → box
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]  # files → file, images → image
    if word.endswith("s") and not word.endswith(("us", "ss", "is", "news")):
        return word[:-1]  # issues → issue; status, class, analysis, news stay
    return word
