"""Newline-delimited JSON-RPC over this process's stdin/stdout, on asyncio's own pipe transports.

The SDK's `stdio_server` reads and writes through `anyio.wrap_file`, which hands every line to a
worker thread and back. That round trip is most of what a gateway adds to a call, so the client
side of the gateway uses event-loop pipes instead: no threads, one `write` per message.

As in the SDK, fd 0 and fd 1 are diverted while serving (stdin to /dev/null, stdout to stderr),
so a stray `print` or a child that inherits them can never corrupt the wire; they are restored on
exit. Where stdin is not something asyncio can watch (a regular file, which ends by itself), the
SDK's transport is used as it is; a stdout that is a regular file (`manifold serve > log`) is
written directly, since a write to a file never waits for a reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from functools import partial
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from mcp_manifold._config.switches import speed_up_on
from mcp_manifold._core.framing import misread_request_answer, unreadable_line_answer
from mcp_manifold._front.fast_lane import FastLane
from mcp_manifold._front.server import McpFront
from mcp_manifold._front.signals import Stopper
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._sdk import create_context_streams

logger = logging.getLogger(__name__)

LANE_SWITCH = "MANIFOLD_STDIO_LANE"  # "0" turns the fast lane off
# One JSON-RPC line may carry a large tool result; asyncio's default 64 KiB line limit is too small.
_LINE_LIMIT = 256 * 1024 * 1024

Send = Callable[[bytes], Awaitable[None]]


class Interceptor(Protocol):
    """Something that may answer a raw inbound line itself (the fast lane) instead of the SDK server."""

    def take(self, line: bytes, task_group: anyio.abc.TaskGroup) -> bool: ...


def _watchable(fd: int) -> bool:
    """Whether asyncio's pipe transports can watch `fd`: pipes, sockets and terminals.

    Not every character device: epoll refuses /dev/null (EPERM), a client's stdin under `docker run`
    without `-i` or a service's, and the gateway hung there with a traceback instead of ending at EOF."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


@asynccontextmanager
async def stdio_streams(
    interceptor: Callable[[Send], Interceptor] | None = None,
    on_hangup: Callable[[Callable[[], None]], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) message streams an SDK `Server.run` expects, served over stdin/stdout.

    `interceptor`, given the function that writes a frame to the client, builds what sees every
    inbound line first and may answer it directly. `on_hangup` is handed a function that ends the
    input as if the client had closed stdin (how a signal stops the server in order).
    """
    # Not the SDK's transport for a stdin that can block: its reading thread cannot be stopped, so a
    # signal or Ctrl-C would wait for the client to close stdin (it did, with stdout sent to a file).
    if not _watchable(0):
        async with stdio_server() as streams:
            yield streams
        return
    async with AsyncExitStack() as stack:
        wire_in, wire_out = _divert_standard_fds(stack)
        reader, writer = await _open_pipes(wire_in, wire_out, stack)
        if on_hangup is not None:
            on_hangup(reader.feed_eof)
        read_sender, read_stream = create_context_streams(SessionMessage | Exception)
        wire = _ClientWire(writer)
        lane = interceptor(wire.write) if interceptor is not None else None
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_pump_in, reader, read_sender, lane, task_group, wire.write)
            try:
                yield read_stream, wire
            finally:
                task_group.cancel_scope.cancel()


def _divert_standard_fds(stack: AsyncExitStack) -> tuple[int, int]:
    """Keep private copies of fd 0/1 for the wire; point 0 at /dev/null and 1 at stderr meanwhile."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    saved_in = os.dup(0)
    saved_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)

    stack.callback(restore)
    return wire_in, wire_out


class Writer(Protocol):
    """What the wire writes to: asyncio's `StreamWriter`, or `_FileWriter`."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class _FileWriter:
    """A stdout that is a regular file, which asyncio's pipe transports refuse: plain writes, which a file
    takes at once (there is no reader to wait for)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None


async def _open_pipes(wire_in: int, wire_out: int, stack: AsyncExitStack) -> tuple[asyncio.StreamReader, Writer]:
    loop = asyncio.get_running_loop()
    # A terminal's file description is shared with the shell; leave it blocking as we found it.
    was_blocking = os.get_blocking(wire_in), os.get_blocking(wire_out)
    in_file = os.fdopen(wire_in, "rb", buffering=0)
    reader = asyncio.StreamReader(limit=_LINE_LIMIT, loop=loop)
    in_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), in_file)
    writer: Writer
    if _watchable(wire_out):
        out_file = os.fdopen(wire_out, "wb", buffering=0)
        out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out_file)
        writer = asyncio.StreamWriter(out_transport, out_protocol, None, loop)
        close_out = out_transport.close
    else:
        writer = _FileWriter(wire_out)
        close_out = partial(os.close, wire_out)

    def close() -> None:
        for fd, blocking in zip((wire_in, wire_out), was_blocking, strict=True):
            with suppress(OSError):
                os.set_blocking(fd, blocking)
        in_transport.close()
        close_out()

    stack.callback(close)
    return reader, writer


async def _pump_in(
    reader: asyncio.StreamReader, sender: Any, lane: Interceptor | None, task_group: anyio.abc.TaskGroup, send: Send
) -> None:
    """Parse each line into a message; a line the SDK cannot read is answered here with the reason."""
    async with sender:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    return  # EOF: the client hung up
            except asyncio.LimitOverrunError as exc:
                await reader.readexactly(exc.consumed)  # drop the oversized line, keep serving
                with suppress(asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    await reader.readuntil(b"\n")
                reason = f"Parse error: message longer than {_LINE_LIMIT} bytes dropped"
                await send(
                    _frame({"jsonrpc": "2.0", "id": None, "error": {"code": types.PARSE_ERROR, "message": reason}})
                )
                continue
            if not line.strip():
                continue
            if lane is not None and _taken(lane, line, task_group):
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception:
                # The SDK server would answer nothing, and the client wait forever: say what was wrong.
                answer = unreadable_line_answer(line)
                if answer is not None:
                    await send(_frame(answer))
                continue
            if isinstance(message, types.JSONRPCNotification) and b'"id"' in line:
                answer = misread_request_answer(line)  # a request with a bad id, read as a notification
                if answer is not None:
                    await send(_frame(answer))
                    continue
            await sender.send(SessionMessage(message))


def _taken(lane: Interceptor, line: bytes, task_group: anyio.abc.TaskGroup) -> bool:
    """Whether the lane answers `line`; a failure of the lane leaves the line to the SDK server."""
    try:
        return lane.take(line, task_group)
    except Exception:
        logger.exception("fast lane failed on a line; the SDK server answers it")
        return False


class _ClientWire:
    """The client's end of stdout, for the SDK server's messages (it is the server's write stream) and for
    the lane's answers alike. Each message is written in the task that sends it, at once, so the client
    reads them in the order they were sent: a log a server sent during a call comes before the call's
    answer, whichever path answered it (through a stream and a writer task of its own, the server's log
    could be overtaken by the lane's answer, written straight to the pipe). One `write` per message, so
    messages from several tasks never interleave."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    async def write(self, frame: bytes) -> None:
        self._writer.write(frame)
        await self._writer.drain()

    async def send(self, session_message: SessionMessage) -> None:
        message = session_message.message
        try:
            data = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        except Exception as exc:
            # Content no wire can carry must cost this message, never the connection.
            logger.error("a message to the client could not be encoded, sent an error instead: %s", exc)
            request_id = getattr(message, "id", None)
            if request_id is None or isinstance(message, types.JSONRPCRequest):
                return
            reason = "the answer could not be encoded as JSON"
            data = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": types.INTERNAL_ERROR, "message": reason}}
            ).encode()
        await self.write(data + b"\n")

    def close(self) -> None:
        """Nothing to close: the pipe outlives the server's use of it (`stdio_streams` closes it)."""

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> _ClientWire:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def serve_stdio(gateway: Gateway, stopper: Stopper | None = None) -> None:
    """Serve one client over this process's stdin/stdout until it hangs up (or a signal hangs up for it)."""
    front = McpFront(gateway)

    def on_hangup(hang_up: Callable[[], None]) -> None:
        if stopper is not None:
            stopper.stop = hang_up  # a signal ends the input like EOF: the SDK server then stops in order

    def lane(send: Send) -> FastLane:
        return FastLane(gateway, send, caller=lambda: front.latest_caller, front=front)

    lane_on = speed_up_on(LANE_SWITCH)  # off: every line goes to the SDK server (for comparisons)
    async with stdio_streams(lane if lane_on else None, on_hangup) as (read_stream, write_stream):
        await front.server.run(read_stream, write_stream, front.initialization_options())
