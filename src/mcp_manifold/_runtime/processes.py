"""A stdio server's process: start it through the SDK, watch its stderr and its exit, stop its group.

The SDK's `stdio_client` starts the server in its own process group and talks to it over its pipes;
this module adds what a gateway needs beyond that: the pid, the last lines of stderr (through a pipe
of our own), notice of an exit even when a grandchild keeps the pipes open, a one-line reason for the
exit, and, when the connection ends, the end of whatever is left of the group (the SDK only signals the
group when the server outlives its closed stdin, so grandchildren would stay).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.abc
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_manifold._runtime.answer_size import (
    COUNTED_PAST,
    containers_in,
    most_containers,
    size_words,
    too_many_containers,
)
from mcp_manifold._sdk import capture_spawned

logger = logging.getLogger(__name__)

EXIT_POLL = 0.5  # seconds between checks that a server's process is still alive
GROUP_KILL_TIMEOUT = 2.0  # SIGTERM to SIGKILL for what is left of a server's process group
_MAX_LINE = 65536  # a server that never ends its line still stays bounded


async def open_stdio(
    params: StdioServerParameters,
    stack: AsyncExitStack,
    watchers: anyio.abc.TaskGroup,
    *,
    on_stderr_line: Callable[[str], None],
    on_exit: Callable[[str], None],
    read_stdout: Callable[[anyio.abc.ByteReceiveStream], anyio.abc.ByteReceiveStream] | None = None,
    server: str = "server",
    max_line: int,
    stderr_kept: int,
) -> tuple[Any, Any | None]:
    """Start the server; returns its (read, write) streams and its process. `stack` owns the process.

    `on_stderr_line(line)` gets the lines the server writes to stderr, of each read the last `stderr_kept`
    (as many as the caller keeps: older ones would only push each other out); `on_exit(reason)` is called
    once the process is gone (`process killed by SIGKILL`, `process exited with code 3`, ...). The watchers
    run in `watchers`, which must outlive the transport. With `read_stdout`, the SDK's transport reads
    the server's stdout through `read_stdout(stdout)` (the raw stdio leg takes its answers there), its
    lines bounded by `max_line` bytes (`max_answer_bytes`; the SDK's reader, and the raw leg's, keep a line
    whole until its newline, so a line that never ends would take the gateway's memory with it): a longer
    one ends the connection to `server`, and `on_exit` hears why.
    """
    read_fd, write_fd = os.pipe()
    errlog = os.fdopen(write_fd, "w")
    spawned: list[Any] = []
    # Pushed before the transport so it runs after the SDK has stopped the server.
    stack.push_async_callback(kill_group_leftovers, spawned)
    try:

        def reading(stdout: anyio.abc.ByteReceiveStream) -> anyio.abc.ByteReceiveStream:
            bounded = BoundedLines(stdout, server, on_exit, max_line)
            return read_stdout(bounded) if read_stdout is not None else bounded

        with capture_spawned(spawned, reading):
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        errlog.close()  # the child holds its own copy; ours would keep EOF from ever arriving
    process = spawned[-1] if spawned else None
    watchers.start_soon(_watch_stderr, read_fd, process, on_stderr_line, on_exit, stderr_kept)
    if process is not None:
        watchers.start_soon(_watch_exit, process, on_exit)
    return streams, process


class LineTooLong(ConnectionError):
    """A server wrote a line on stdout longer than its bound (the SDK's reader ends on a `ConnectionError`)."""


class BoundedLines(anyio.abc.ByteReceiveStream):
    """A server's stdout in whole lines, ended once a line passes `limit` bytes (and ended
    for good). Whole lines, because the SDK's reader joins what it has of a line to each new piece
    of it: a long line read piece by piece costs it time in the square of its length."""

    def __init__(
        self,
        inner: anyio.abc.ByteReceiveStream,
        server: str,
        on_end: Callable[[str], None],
        limit: int,
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._server = server
        self._on_end = on_end
        self._open: list[bytes] = []  # the pieces read of the line not ended yet
        self._open_size = 0
        self._ended: str | None = None  # why, once a line was too long
        self._containers = most_containers(limit)  # objects and arrays cost far more parsed (`answer_size`)
        self._judged_past = min(COUNTED_PAST, limit)  # reads no longer than this hold no line to judge

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while self._ended is None:
            try:
                data = await self._inner.receive(max_bytes)
            except anyio.EndOfStream:
                if not self._open:
                    raise
                rest = b"".join(self._open)  # a last line with no newline: the reader decides, if it fits
                self._open, self._open_size = [], 0
                lines = rest
            else:
                end = data.rfind(b"\n") + 1
                if not end:
                    self._open.append(data)
                    self._open_size += len(data)
                    if self._open_size > self._limit:
                        self._end(self._too_long())
                    continue
                lines = b"".join([*self._open, data[:end]]) if self._open else data[:end]
                self._open, self._open_size = ([data[end:]], len(data) - end) if end < len(data) else ([], 0)
            unfit = self._first_unfit(lines) if len(lines) > self._judged_past else None
            if unfit is None:
                return lines
            at, why = unfit
            self._end(why)
            if at:  # the lines before it are whole and fit: theirs to read, then the end
                return lines[:at]
        raise LineTooLong(self._ended)

    def _first_unfit(self, lines: bytes) -> tuple[int, str] | None:
        """Where in `lines` (whole lines, the last one's newline perhaps missing at the end of the stream) the
        first line starts that is too long or holds too many brackets, and why; None if none is. Each line is
        judged alone, so that the verdict is the same however the server's writes were split into reads."""
        # The whole read first, counted in C: most reads are far from either bound.
        if len(lines) <= self._limit and containers_in(lines) <= self._containers:
            return None
        start = 0
        while start < len(lines):
            stop = lines.find(b"\n", start)
            stop = len(lines) if stop < 0 else stop
            if stop - start > self._limit:
                return start, self._too_long()
            end = stop + 1
            if end - start > COUNTED_PAST and containers_in(lines, start, end) > self._containers:
                return start, f"server {self._server!r} wrote an answer of {too_many_containers(self._limit)} on stdout"
            start = end
        return None

    def _too_long(self) -> str:
        return (
            f"server {self._server!r} wrote a line of more than {size_words(self._limit)} on stdout (max_answer_bytes)"
        )

    def _end(self, why: str) -> None:
        self._open, self._open_size = [], 0
        self._ended = why
        logger.warning("%s: its connection is closed", why)
        self._on_end(why)

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self._inner.extra_attributes


async def _watch_stderr(
    fd: int, process: Any | None, on_line: Callable[[str], None], on_exit: Callable[[str], None], keep: int
) -> None:
    """Pass on the last `keep` lines of each read of the server's stderr; EOF means the process is gone.

    Only the last ones: each line passed on costs the gateway's event loop its decoding and scrubbing
    (some 15 us), and a server writing short lines as fast as it can sent 32,000 of them per read, which
    held the loop for half a second at a time (another server's calls took 860 ms instead of 1)."""
    os.set_blocking(fd, False)
    pending = b""
    try:
        while True:
            await anyio.wait_readable(fd)
            try:
                chunk = os.read(fd, _MAX_LINE)
            except BlockingIOError:
                continue
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.rsplit(b"\n", keep + 1)
            if lines and b"\n" in lines[0]:  # the lines before the last `keep`, in one piece
                del lines[0]
            for line in lines:
                on_line(line.decode(errors="replace").rstrip())
            if len(pending) > _MAX_LINE:
                on_line(pending.decode(errors="replace"))
                pending = b""
    finally:
        if pending:
            on_line(pending.decode(errors="replace").rstrip())
        os.close(fd)
    if process is not None:
        await _exit_status_soon(process)
    on_exit(exit_reason(process.returncode if process is not None else None))


async def _watch_exit(process: Any, on_exit: Callable[[str], None]) -> None:
    """Notice the server's exit even when a grandchild keeps its pipes (and so EOF) from coming."""
    while process.returncode is None:
        await anyio.sleep(EXIT_POLL)
    on_exit(exit_reason(process.returncode))


# A line that says what went wrong, in the words of the usual runtimes (Python, node, Go, shells).
_TELLING = re.compile(r"\b\w*(Error|Exception)\b|\berror\b|\bfatal\b|\bpanic\b|cannot|not found|denied", re.IGNORECASE)


def telling_line(lines: Sequence[str]) -> str | None:
    """The stderr line worth quoting when a server failed: the last one that names an error, else the last.

    A dying node server's last line is its version (`Node.js v20.20.2`), a Python one's the exception
    after its traceback; the line that says what happened is seldom the last one of all.
    """
    shown = [line for line in lines if line.strip()]
    if not shown:
        return None
    return next((line for line in reversed(shown) if _TELLING.search(line)), shown[-1])


async def exit_of(process: Any | None) -> str | None:
    """`process exited with code 2` when `process` has ended (its status awaited briefly), else None."""
    if process is None:
        return None
    await _exit_status_soon(process)
    return None if process.returncode is None else exit_reason(process.returncode)


async def _exit_status_soon(process: Any) -> None:
    """Give a process whose pipe has closed up to `EXIT_POLL` seconds to have its exit status."""
    with anyio.move_on_after(EXIT_POLL):  # the exit status usually follows the closed pipe closely
        while process.returncode is None:
            await anyio.sleep(0.01)


def exit_reason(returncode: int | None) -> str:
    """`process exited with code 3`, `process killed by SIGKILL`, or `process exited` when unknown."""
    if returncode is None:
        return "process exited"
    if returncode < 0:
        try:
            return f"process killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"process killed by signal {-returncode}"
    return f"process exited with code {returncode}"


def terminate_group(pid: int | None) -> None:
    """SIGTERM a stdio server's process group at once (the group id is its pid), if it is still there."""
    if pid is None or sys.platform == "win32":  # pragma: no cover - no process groups on Windows
        return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGTERM)


async def kill_group_leftovers(spawned: list[Any]) -> None:
    """Stop whatever is left of each spawned server's process group (SIGTERM, then SIGKILL)."""
    if sys.platform == "win32":  # pragma: no cover - the SDK's job objects cover Windows
        return
    from mcp.os.posix.utilities import terminate_posix_process_tree

    with anyio.CancelScope(shield=True):
        for process in spawned:
            # The group id is the server's pid (a new session); a group with no members left is ESRCH.
            await terminate_posix_process_tree(process, GROUP_KILL_TIMEOUT)


async def run_shell(command: str, timeout: float) -> int | None:
    """Run `command` through the shell in a process group of its own: its exit code, or None when it ran
    past `timeout`. Then, or when cancelled, the whole group is killed (the shell and what it started)."""
    process = await anyio.open_process(
        command, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with anyio.move_on_after(timeout):
            return await process.wait()
        return None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with anyio.CancelScope(shield=True):
                await process.wait()
