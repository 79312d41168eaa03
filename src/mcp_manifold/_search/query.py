"""Query preparation: what of a request names a tool, and which parts name different tools.

Requests often carry argument values — "save it to /root/markdown/report.md", "open
https://www.youtube.com/watch?v=…". Their words describe the data, not the tool ("markdown" there
must not pull in `html_to_markdown`), so a path becomes "file <extension>" and a URL becomes
"url <site words>". A path the request puts something into ("save it to …", "generate a report
in …") becomes "write file <extension>": whatever else the request needs, it needs a tool that
writes that file, and nothing else in its words says so. A request that chains steps ("find X,
then write Y") names one tool per step, which one whole-request embedding blurs: `clauses` splits
it so each step can be embedded.
"""

from __future__ import annotations

import re

# A URL ends before whitespace or before punctuation that ends the sentence around it.
_URL = re.compile(r"\b(?:https?://|www\.)[^\s'\"<>)\]]+?(?=[.,;:!?]?(?:\s|$))", re.IGNORECASE)
# /abs/path, ~/path, ./rel/path and C:\win\path; a lone "/" or "and/or" is not a path.
_PATH = re.compile(
    r"(?<![\w/])(?:~|\.{1,2}|[A-Za-z]:)?[/\\](?:[\w.\-]+[/\\])*[\w\-]+(?:\.(?P<ext>[A-Za-z0-9]{1,5}))?\b"
)
# Verbs that make the next path in their sentence a destination ("save the summary as Markdown to …").
_OUTPUT_VERB = re.compile(
    r"\b(?:save|saved|saving|write|writes|writing|written|store|stored|export|exported|output|"
    r"generate|generated|create|created|produce|produced|draft|drafted|dump)\b",
    re.IGNORECASE,
)
# Where the words that can govern a path start: the end of the previous sentence.
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)|\n")
_HOST_NOISE = frozenset({"www", "com", "org", "net", "io", "cn", "co", "html", "htm", "php"})
_CLAUSE = re.compile(r"(?<=[.!?;:])\s+|\n+|,?\s+(?:and\s+)?then\s+|,\s+(?:and|also)\s+", re.IGNORECASE)
_MIN_CLAUSE_WORDS = 3


def lexical_query(text: str, *, output_paths: bool = True) -> str:
    """The request with URLs and file paths replaced by what kind of thing they are.

    With `output_paths`, a path that an output verb earlier in its sentence points at (and no other
    path stands between them) is described as "write file <ext>" rather than "file <ext>".
    """
    text = _URL.sub(_describe_url, text)
    out: list[str] = []
    last = 0
    for match, output in _paths(text):
        out += [text[last : match.start()], _describe_path(match, output=output_paths and output)]
        last = match.end()
    return "".join([*out, text[last:]])


def destinations(text: str) -> list[str]:
    """What the request saves to, each as its `lexical_query` wording ("write file md"), first to last."""
    return [_describe_path(match, output=True) for match, output in _paths(_URL.sub(_describe_url, text)) if output]


def _paths(text: str) -> list[tuple[re.Match[str], bool]]:
    """Each file path in `text`, and whether an output verb earlier in its sentence points at it."""
    found: list[tuple[re.Match[str], bool]] = []
    last = 0
    for match in _PATH.finditer(text):
        governing = text[last : match.start()]
        sentence = governing[max((m.end() for m in _SENTENCE_END.finditer(governing)), default=0) :]
        found.append((match, _OUTPUT_VERB.search(sentence) is not None))
        last = match.end()
    return found


def _describe_url(match: re.Match[str]) -> str:
    host = re.sub(r"^(?:https?://)?", "", match.group(0), flags=re.IGNORECASE).split("/", 1)[0]
    words = [w for w in re.split(r"[.:\-]", host.lower()) if w and w not in _HOST_NOISE and not w.isdigit()]
    return " ".join(["url", *words])


def _describe_path(match: re.Match[str], *, output: bool) -> str:
    ext = match.group("ext")
    kind = f"file {ext.lower()}" if ext else "directory"
    return f"write {kind}" if output else kind


def clauses(text: str) -> list[str]:
    """The request's steps: sentences and "…, then …" parts of at least a few words each."""
    parts = [p.strip() for p in _CLAUSE.split(text) if p and p.strip()]
    merged: list[str] = []
    for part in parts:
        # A fragment too short to name a tool ("Please", "Finally") joins the step before it.
        if merged and len(part.split()) < _MIN_CLAUSE_WORDS:
            merged[-1] = f"{merged[-1]} {part}"
        else:
            merged.append(part)
    return merged
