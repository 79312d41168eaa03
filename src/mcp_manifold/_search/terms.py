"""Turn tool names, descriptions and queries into BM25 terms.

Tool names are identifiers (``github_create_issue``, ``getWeatherForecast``, ``mp3-to-wav``),
so they are split into words before anything else; after that every text goes through the same
lowercase → stopword → plural-folding pipeline so a query word meets the same term in a name or a
description.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mcp_manifold._search.stem import stem
from mcp_manifold._search.stopwords import STOPWORDS

# Runs of letters or digits (any script); underscores, dashes, dots and spaces all separate words.
_WORD = re.compile(r"[^\W_]+")
# camelCase, PascalCase with acronyms (HTTPServer → HTTP Server) and letter/digit boundaries.
_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
# Scripts written without spaces: one term per character is a crude but useful fallback.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def split_identifier(text: str) -> list[str]:
    """Split identifiers and prose into lowercase words: ``getHTTPResponse_v2`` → get, http, response, v, 2."""
    words: list[str] = []
    for run in _WORD.findall(text):
        words.extend(_split_run(run))
    return words


@lru_cache(maxsize=65536)
def _split_run(run: str) -> tuple[str, ...]:
    # Cached: a catalog repeats the same few thousand words, and splitting is most of tokenising.
    words: list[str] = []
    for part in _BOUNDARY.split(run):
        if _UNSPACED.search(part):
            words.extend(_split_unspaced(part))
        elif part:
            words.append(part.lower())
    return tuple(words)


def _split_unspaced(part: str) -> list[str]:
    """Keep Latin runs inside mixed text whole, and cut CJK runs into single characters."""
    out: list[str] = []
    latin = ""
    for ch in part:
        if _UNSPACED.match(ch):
            if latin:
                out.append(latin.lower())
                latin = ""
            out.append(ch)
        else:
            latin += ch
    if latin:
        out.append(latin.lower())
    return out


def tokenize(text: str, *, stemming: bool = True) -> list[str]:
    """Words of `text` as index terms: split, lowercased, stopwords dropped, plus singulars of plurals."""
    words: list[str] = []
    for run in _WORD.findall(text):
        parts = _split_run(run)
        words.extend(parts)
        # Brand names are camelCase in prose ("GitHub") but one word in identifiers ("github_...");
        # keeping the joined form as well lets either spelling meet the other.
        if len(parts) > 1 and not _UNSPACED.search(run):
            words.append(run.lower())
    kept = [w for w in words if w not in STOPWORDS and not _is_stray_letter(w)]
    if not stemming:
        return kept
    # The folded form is added, not substituted: "issues" still matches "issues" best, "issue" too.
    return kept + [folded for w in kept if (folded := stem(w)) != w]


def _is_stray_letter(word: str) -> bool:
    # "user's" and "e.g." leave single Latin letters behind; digits and CJK characters stay.
    return len(word) == 1 and "a" <= word <= "z"
