"""Reading parts of a spilled result file: stat, head, tail, slice, grep, read.

Every answer is inline by design (reading a spilled file must never spill again). Line-based
answers clip very long lines (a minified JSON document is one line) and say how to get the rest:
`read` with `offset` and `maxBytes` reads any byte range.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_manifold._core.reading import DEFAULT_READ_LINES as DEFAULT_LINES
from mcp_manifold._core.reading import READ_OPS as OPS
from mcp_manifold._core.reading import ReadAnswer as Answer
from mcp_manifold._core.suggestions import quoted
from mcp_manifold._errors import InvalidRequest

MAX_LINE_CHARS = 2000
MAX_GREP_MATCHES = 200


def stat(path: Path) -> dict[str, int | str]:
    from mcp_manifold._core.results import estimate_tokens

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


class GrepTooLong(Exception):
    """A grep ran past its deadline (a file too large to search in that time)."""


def grep(path: Path, pattern: str, context: int, deadline: float | None = None) -> Answer:
    """Case-insensitive regex search; `N:` marks a matching line, `N-` a context line, `--` a gap.

    RE2 matches in time linear in the line, whatever the pattern, so the only bound needed is the
    file's size: past `deadline` (`time.monotonic()`), checked between lines, it stops (`GrepTooLong`).
    """
    regex = compile_pattern(pattern)
    before: deque[tuple[int, str]] = deque(maxlen=context)
    out: list[str] = []
    matches = 0
    after_left = 0
    last_printed = 0
    total = 0
    for number, line in _lines(path):
        total = number
        if deadline is not None and time.monotonic() > deadline:
            raise GrepTooLong
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
    note = (
        f"{matches} matching line(s) of {total}{capped}" if matches else f"no line of {total} matches {quoted(pattern)}"
    )
    return Answer("\n".join(out), note)


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2, case-insensitive. RE2 has no backreferences or lookaround (the features
    that make a backtracking engine such as Python's `re` take exponential time); a pattern using them is
    refused with a clear error."""
    import re2  # type: ignore[import-untyped]

    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a bad pattern is the caller's error, not a line on the gateway's stderr
    # Only where a match starts and ends is used. Groups would cost their number times the match's length:
    # 1,000 nested groups around `.*` held a core for minutes over a 4 MB line, past any deadline.
    options.never_capture = True
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRequest(
            f"'pattern' is not a valid regular expression: {reason} (grep uses RE2 syntax: no backreferences "
            "or lookaround)"
        ) from None
    except (TypeError, ValueError) as exc:  # a NUL or a lone surrogate in the pattern
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


def _around(line: str, found: Any) -> str:
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


# --- from async code (the gateway) -----------------------------------------------------------------

GREP_TIMEOUT = 10.0  # seconds a grep may run (a very large file) before it stops with an error


async def stat_file(path: Path) -> dict[str, int | str]:
    """`stat` off the event loop, with file errors made clear."""
    return await _in_thread(stat, path)


async def read_part(
    path: Path,
    op: str,
    *,
    lines: int = DEFAULT_LINES,
    first: int = 1,
    last: int | None = None,
    pattern: str = "",
    context: int = 0,
    offset: int = 0,
    max_bytes: int = 0,
) -> Answer:
    """One of `head`, `tail`, `slice`, `grep` or `read` of a result file, off the event loop."""
    if op in ("head", "tail"):
        return await _in_thread(head if op == "head" else tail, path, lines)
    if op == "slice":
        return await _in_thread(slice_lines, path, first, last if last is not None else first + DEFAULT_LINES - 1)
    if op == "grep":
        return await _grep(path, pattern, context)
    if op == "read":
        return await _in_thread(read, path, offset, max_bytes)
    raise InvalidRequest(f"unknown op {op!r}: expected one of {', '.join(OPS)}")


async def _in_thread(op: Any, path: Path, *args: Any) -> Any:
    """An op off the event loop (a large file takes a while), with file errors made clear."""
    import anyio

    from mcp_manifold._errors import ManifoldError, NotFound

    try:
        return await anyio.to_thread.run_sync(functools.partial(op, path, *args))
    except FileNotFoundError:
        raise NotFound(f"'resultFile': {path} no longer exists (spilled files are deleted after a while)") from None
    except OSError as exc:
        raise ManifoldError(f"'resultFile': cannot read {path}: {exc.strerror or exc}") from None


async def _grep(path: Path, pattern: str, context: int, timeout: float = GREP_TIMEOUT) -> Answer:
    """`grep` off the event loop, stopped after `timeout` seconds.

    Matching is RE2's (linear time: a pattern with nested repetition such as `(a+)+$` costs what any
    other does), so a worker thread is enough: the time is bounded by the file's size, and the deadline
    bounds that too. (Python's `re` could backtrack for hours on one line, holding the interpreter; it
    needed a child process per grep, killed after a timeout.)
    """
    compile_pattern(pattern)  # a malformed pattern fails here, before a thread is taken
    try:
        return await _in_thread(grep, path, pattern, context, time.monotonic() + timeout)
    except GrepTooLong:
        raise InvalidRequest(
            f"op 'grep' stopped after {timeout:g}s: the file is too large to search in that time; "
            "narrow the search with op 'slice' or 'read', or a more selective pattern"
        ) from None
