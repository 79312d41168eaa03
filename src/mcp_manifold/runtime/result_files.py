"""Reading parts of a spilled result file: stat, head, tail, slice, grep, read. Plain file code.

Every answer is inline by design (reading a spilled file must never spill again). Line-based
answers clip very long lines (a minified JSON document is one line) and say how to get the rest:
`read` with `offset` and `maxBytes` reads any byte range.
"""

from __future__ import annotations

import json
import re
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Only this light import at module level: `grep_worker` runs in a fresh interpreter for every grep.
from mcp_manifold._errors import InvalidRequest

OPS = ("stat", "head", "tail", "slice", "grep", "read")
DEFAULT_LINES = 50
MAX_LINE_CHARS = 2000
MAX_GREP_MATCHES = 200


@dataclass(frozen=True)
class Answer:
    """What an op returns: the file's text (or stat JSON) and one line about what was shown."""

    body: str
    note: str


def stat(path: Path) -> dict[str, int | str]:
    from mcp_manifold.core.results import estimate_tokens

    size = 0
    lines = 0
    last = b"\n"
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            size += len(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if size and last != b"\n":
        lines += 1  # a last line without a newline still counts
    return {"resultFile": str(path), "byteSize": size, "lineCount": lines, "estimatedTokens": estimate_tokens(size)}


def head(path: Path, count: int) -> Answer:
    shown = []
    total = 0
    for number, line in _lines(path):
        total = number
        if number <= count:
            shown.append(_clip(line))
    return Answer("\n".join(shown), _range_note(1, len(shown), total))


def tail(path: Path, count: int) -> Answer:
    kept: deque[tuple[int, str]] = deque(maxlen=min(count, sys.maxsize))  # a huge count means "all"
    for item in _lines(path):
        kept.append(item)
    total = kept[-1][0] if kept else 0
    first = kept[0][0] if kept else 0
    return Answer("\n".join(_clip(line) for _, line in kept), _range_note(first, total, total))


def slice_lines(path: Path, first: int, last: int) -> Answer:
    if last < first:
        raise InvalidRequest(f"'toLine' ({last}) must not be smaller than 'fromLine' ({first})")
    shown = []
    total = 0
    for number, line in _lines(path):
        total = number
        if first <= number <= last:
            shown.append(_clip(line))
    end = first + len(shown) - 1
    return Answer("\n".join(shown), _range_note(first, end, total))


def grep(path: Path, pattern: str, context: int) -> Answer:
    """Case-insensitive regex search; `N:` marks a matching line, `N-` a context line, `--` a gap."""
    regex = compile_pattern(pattern)
    before: deque[tuple[int, str]] = deque(maxlen=context)
    out: list[str] = []
    matches = 0
    after_left = 0
    last_printed = 0
    total = 0
    for number, line in _lines(path):
        total = number
        found = regex.search(line) if matches < MAX_GREP_MATCHES else None
        if found:
            matches += 1
            for prior_number, prior in before:
                last_printed = _emit(out, prior_number, "-", _clip(prior), last_printed)
            before.clear()
            last_printed = _emit(out, number, ":", _around(line, found), last_printed)
            after_left = context
        elif after_left:
            last_printed = _emit(out, number, "-", _clip(line), last_printed)
            after_left -= 1
        else:
            before.append((number, line))
    capped = f" (stopped at {MAX_GREP_MATCHES}; narrow the pattern)" if matches >= MAX_GREP_MATCHES else ""
    note = f"{matches} matching line(s) of {total}{capped}" if matches else f"no line of {total} matches {pattern!r}"
    return Answer("\n".join(out), note)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InvalidRequest(f"'pattern' is not a valid regular expression: {exc}") from None


def read(path: Path, offset: int, max_bytes: int) -> Answer:
    size = path.stat().st_size
    if offset > size:
        return Answer("", f"offset {offset} is past the end: the file has {size} bytes")
    # Never ask for more than is there: a huge maxBytes would be allocated up front.
    wanted = size - offset if not max_bytes else min(max_bytes, size - offset)
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(wanted)
    end = offset + len(data)
    # Cut at character boundaries: a multi-byte character split by the range is dropped, not garbled.
    text = data.decode("utf-8", errors="ignore")
    if end < size:
        note = f"bytes {offset}-{end} of {size}; continue with offset {end}"
    elif offset:
        note = f"bytes {offset}-{end} of {size} (the end)"
    else:
        note = f"all {size} bytes"
    return Answer(text, note)


# --- helpers --------------------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            yield number, line.rstrip("\r\n")


def _clip(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}... [{len(line) - MAX_LINE_CHARS} more characters; use op 'read']"


def _around(line: str, found: re.Match[str]) -> str:
    """A long matching line shown as a window around the match."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    half = MAX_LINE_CHARS // 2
    start = max(0, found.start() - half)
    end = min(len(line), found.end() + half)
    window = f"{'...' if start else ''}{line[start:end]}{'...' if end < len(line) else ''}"
    return f"{window} [line has {len(line)} characters]"


def _emit(out: list[str], number: int, mark: str, text: str, last_printed: int) -> int:
    if last_printed and number > last_printed + 1:
        out.append("--")
    out.append(f"{number}{mark} {text}")
    return number


def _range_note(first: int, last: int, total: int) -> str:
    if total == 0:
        return "the file is empty"
    if last < first:
        return f"no lines there: the file has {total} line(s)"
    return f"lines {first}-{last} of {total}"


def grep_worker() -> None:
    """`grep` in a child process (the gateway kills it when a pattern runs too long): JSON in, JSON out.

    A regular expression with nested repetition can take forever on one line, and Python's `re`
    holds the interpreter while it runs, so no thread or timer in the gateway could stop it.
    """
    request = json.load(sys.stdin)
    try:
        answer = grep(Path(request["path"]), request["pattern"], request["context"])
        reply = {"body": answer.body, "note": answer.note}
    except InvalidRequest as exc:
        reply = {"error": str(exc)}
    except OSError as exc:
        reply = {"error": f"cannot read the file: {exc.strerror or exc}"}
    sys.stdout.write(json.dumps(reply))
