"""The audit log: one JSON line per call, read and prompt, in `audit/audit.jsonl` under the data dir.

It is a call path observer (`CallPath.observe`), so it sees every call of every surface, the fast
lane and the CLI, and the refused ones too (denied, quarantined, rate limited). A line says who
(principal, profile), what (surface, exposed name, server, original name), how it went (outcome,
duration, error) and how big it was (argument and result bytes); never argument values, results
or secrets. It rotates by size (`audit.jsonl.1` is the newest old file). `manifold audit` reads it back
(`read_entries`), newest last.

Replicas sharing state (`state_url`) each keep their own log, every line naming its `replica`; with
`audit_path: "-"` the lines go to standard output for a platform's log collector instead (to standard
error on a stdio gateway, whose standard output is the MCP connection).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import pydantic_core

from mcp_manifold._core.clients import AFTER_ANSWER
from mcp_manifold._files import open_private, private_dir
from mcp_manifold._runtime.call_path import CallRecord

logger = logging.getLogger(__name__)

FILE_NAME = "audit.jsonl"
_ERROR_CHARS = 300


STREAM = "-"  # audit_path for standard output


def audit_dir(data_dir: str | Path, audit_path: str | None = None) -> Path:
    """The audit log's directory: `audit_path` when it names one, else `audit` in the data dir."""
    if audit_path and audit_path != STREAM:
        return Path(audit_path).expanduser()
    return Path(data_dir).expanduser() / "audit"


@lru_cache(maxsize=2)
def _second(whole: int) -> str:
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def timestamp(now: float) -> str:
    """`now` as a line's time, UTC to the millisecond: 2026-11-26T18:00:00.123Z (the second's part is
    formatted once per second, not once per line)."""
    whole = int(now)
    micros = round((now - whole) * 1_000_000)  # to the microsecond first, as datetime does
    if micros == 1_000_000:
        whole, micros = whole + 1, 0
    return f"{_second(whole)}.{micros // 1000:03d}Z"


def entry(record: CallRecord, now: float | None = None) -> dict[str, Any]:
    """One record as the JSON object of its line."""
    line: dict[str, Any] = {
        "time": timestamp(time.time() if now is None else now),
        "principal": record.principal,
        "profile": record.profile,
        "surface": record.target.surface or None,
        "kind": record.kind,
        "name": record.target.exposed,
        "server": record.target.server or None,
        "original": record.target.name or None,
        "outcome": record.outcome,
        "duration_ms": round(record.duration * 1000, 3),
        "arguments_bytes": record.arguments_size,
        "result_bytes": record.result_size,
    }
    if record.calls is not None:
        line["calls"] = record.calls
    if record.spilled:
        line["spilled"] = True
    if record.error:
        line["error"] = record.error if len(record.error) <= _ERROR_CHARS else record.error[: _ERROR_CHARS - 1] + "…"
    return line


class AuditLog:
    """Appends one line per finished call; rotates at `max_bytes`, keeping `backups` old files (with none
    kept it is never rotated: an audit log is not cut short to save space).

    A plain append instead of the standard library's `RotatingFileHandler`: that handler builds a log
    record, formats the line twice and stats the file twice for every line, which was several per cent
    of the gateway's CPU per call over stdio (bench/overhead.py). The lines the fast lanes record after
    their answers, in one pass of the event loop, are written together when the loop next comes round
    (`_Coalesced`): one write and one size check for them all, where a system call or two per line was a
    tenth of an HTTP gateway's own CPU per call (bench/http_app.py). Every other line is written at once.
    (A file may so pass `max_bytes` by one pass's lines before it rotates.)
    """

    def __init__(self, directory: str | Path, max_bytes: int, backups: int, replica: str | None = None) -> None:
        self.path = Path(directory) / FILE_NAME
        private_dir(self.path.parent)
        self.max_bytes = max_bytes
        self.backups = backups
        self.replica = replica  # named on every line when replicas share state
        self._file: Any = _open_log(self.path)
        self._lines = _Coalesced(self._put)

    def __call__(self, record: CallRecord) -> None:
        line = entry(record)
        if self.replica is not None:
            line["replica"] = self.replica
        self._lines.add(_encoded(line))

    def _put(self, lines: bytes) -> None:
        if self.backups > 0:
            # The file's own size: every gateway sharing this data dir appends to it.
            size = os.fstat(self._file.fileno()).st_size
            if size and size + len(lines) > self.max_bytes:
                self._rotate()
        self._file.write(lines)
        self._file.flush()  # on disk (in the page cache): before the answer, or as the loop comes round after it

    def _rotate(self) -> None:
        self._file.close()
        try:
            for number in range(self.backups - 1, 0, -1):
                with suppress(FileNotFoundError):
                    os.replace(
                        self.path.with_name(f"{FILE_NAME}.{number}"), self.path.with_name(f"{FILE_NAME}.{number + 1}")
                    )
            with suppress(FileNotFoundError):  # another gateway rotated it a moment ago, or an operator moved it
                os.replace(self.path, self.path.with_name(f"{FILE_NAME}.1"))
        finally:
            self._file = _open_log(self.path)  # whatever went wrong above, the next lines are written

    def close(self) -> None:
        self._lines.flush()
        self._file.close()


class _Coalesced:
    """Lines handed to `put`: at once, after any still waiting, for a call recorded before its answer (as
    the SDK's path records them: the line is in the file before the client has the answer); gathered and
    handed over together when the loop next comes round for calls recorded after their answers (the fast
    lanes', `AFTER_ANSWER`). Called from the loop's thread, or with no loop at all."""

    def __init__(self, put: Callable[[bytes], None]) -> None:
        self._put = put
        self._lines: list[bytes] = []
        self._due_on: asyncio.AbstractEventLoop | None = None  # the loop that will write the waiting lines

    def add(self, line: bytes) -> None:
        loop: asyncio.AbstractEventLoop | None = None
        if AFTER_ANSWER.get():
            with suppress(RuntimeError):  # no event loop: at once
                loop = asyncio.get_running_loop()
        if loop is None:
            self.flush()
            self._put(line)
            return
        self._lines.append(line)
        if self._due_on is not loop:  # nothing due yet, or due on a loop that has since stopped
            self._due_on = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        self._due_on = None
        lines, self._lines = self._lines, []
        if not lines:
            return
        try:
            self._put(b"".join(lines))
        except Exception:  # a full disk, say: said, and the calls go on (as when each line was written alone)
            logger.exception("audit log: %d line(s) could not be written", len(lines))


def _encoded(line: dict[str, Any]) -> bytes:
    """The line as compact JSON in UTF-8, with its newline. A lone surrogate (a server's error or a token's
    subject can carry one, as a JSON escape) is no UTF-8: it is written as the text of its escape
    (`\\ud800`, six characters), so the line is neither lost nor one that a reader in UTF-8 (`manifold
    audit`, a log collector) cannot print."""
    try:
        return pydantic_core.to_json(line) + b"\n"
    except pydantic_core.PydanticSerializationError:
        printable = {key: _printable(value) for key, value in line.items()}
        return pydantic_core.to_json(printable) + b"\n"


def _printable(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _open_log(path: Path) -> BinaryIO:
    """The log opened for appending, created 0600 (rotated files keep that mode)."""
    return os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


class StreamAuditLog(AuditLog):
    """The audit lines on a standard stream (`audit_path: "-"`): never rotated, never closed."""

    def __init__(self, stdout: bool, replica: str | None = None) -> None:
        self.replica = replica
        self._file = sys.stdout.buffer if stdout else sys.stderr.buffer
        self._lines = _Coalesced(self._put)

    def _put(self, lines: bytes) -> None:
        self._file.write(lines)
        self._file.flush()

    def close(self) -> None:
        self._lines.flush()
        self._file.flush()


def log_files(directory: str | Path) -> list[Path]:
    """The audit log and its rotated files, oldest first."""
    base = Path(directory) / FILE_NAME
    rotated = sorted(
        (path for path in base.parent.glob(FILE_NAME + ".*") if path.suffix[1:].isdigit()),
        key=lambda path: int(path.suffix[1:]),
        reverse=True,
    )
    return [*rotated, *([base] if base.exists() else [])]


def read_entries(directory: str | Path) -> Iterator[dict[str, Any]]:
    """Every line of the audit log, oldest first; a line that is not JSON (cut by a crash) is skipped."""
    for path in log_files(directory):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue


def matches(line: dict[str, Any], filters: dict[str, str | None]) -> bool:
    """Whether a line has every given field value (`name` and `server` also match as a prefix with `*`)."""
    for key, wanted in filters.items():
        if wanted is None:
            continue
        value = str(line.get(key) or "")
        if wanted.endswith("*") and value.startswith(wanted[:-1]):
            continue
        if value != wanted:
            return False
    return True
