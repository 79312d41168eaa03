"""A plain `tools/call` to a stdio server written straight to its stdin, and its answer read straight off
its stdout, outside the SDK's request machinery.

The SDK's client sends a request by building its model, parking a pair of memory streams for the
answer, opening a tracing span, handing the model to its transport's writer task (which dumps it to
JSON) and waking the caller from its dispatcher task when the answer comes: three task switches and
two model round trips per call, about a fifth of the gateway's CPU for a plain call over HTTP. This
leg writes the request the session stamped (the same `_meta`) as one JSON line on the server's stdin,
beside the SDK's writer (each message is one write, so lines never interleave).

Its answers are taken where the SDK's transport reads the server's stdout (`reading_stdout`): a line
that is a well-formed answer to one of the leg's requests wakes that request from the reader's task,
and is never decoded, validated into a model or passed through the session's read stream (two more task
switches). Everything else the server writes goes on to the SDK's reader whole lines at a time, in
order: lines written before an answer reach the session before the answer is taken, so a log message or
a request the server sends mid-call is handled first, as on the SDK's path. An answer the byte reader
does not recognise (its id written with escapes, say) still reaches its request: the session's read
stream is read through `reading`, which takes the leg's answers out of the messages the SDK parsed.

Everything else (the handshake, listings, notifications, the server's requests and their answers,
the process's life) stays with the SDK's transport and session. Request ids are strings
(`outbound.raw_request`): the session numbers its own requests, and the two never meet.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, JSONRPCError, JSONRPCResponse

from mcp_manifold._runtime.outbound import RAW_ID_PREFIX, not_sent, raw_request

logger = logging.getLogger(__name__)

_CANCEL_TIMEOUT = 2.0  # seconds a courtesy cancel may take to write before it is given up
# Every answer to the leg names its id so, unless the server writes the string with escapes.
_ANSWER_MARK = b'"' + RAW_ID_PREFIX.encode()
_RESULT_KEYS = frozenset({"jsonrpc", "id", "result"})
_ERROR_KEYS = frozenset({"jsonrpc", "id", "error"})
_ERROR_DATA_KEYS = frozenset({"code", "message", "data"})


class _Waiting:
    """One request on the leg: set once, with its result or the error it becomes."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: MCPError | None = None


class StdioLeg:
    """The raw leg of one stdio backend session: the server's stdin and the requests waiting on it."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.posts = 0  # requests written on this leg
        self._stdin: anyio.abc.ByteSendStream | None = None  # until `attach`
        self._writer: asyncio.StreamWriter | None = None  # the asyncio stream under it, when there is one
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Waiting] = {}
        self._closed = False

    def reading_stdout(self, stdout: anyio.abc.ByteReceiveStream) -> anyio.abc.ByteReceiveStream:
        """The server's `stdout` as the SDK's transport should read it: less the answers to this leg."""
        return _StdoutAnswers(stdout, self)

    def attach(self, stdin: anyio.abc.ByteSendStream) -> None:
        """The server's stdin, once its process is up: the leg writes its requests there."""
        self._stdin = stdin
        # anyio's send yields to the loop after every write, in a shielded cancel scope: a pass of the
        # loop and two scopes per call, where the leg waits for the answer right after anyway. So the
        # leg writes to the asyncio stream under it (what `open_process` makes on asyncio), and waits
        # only when the pipe is full; any other stream is written to through anyio.
        writer = getattr(stdin, "_stream", None)
        self._writer = writer if isinstance(writer, asyncio.StreamWriter) else None

    def reading(self, read: Any) -> _Answers:
        """`read` (the transport's stream to the session) with this leg's answers taken out of it."""
        return _Answers(read, self)

    async def post(
        self, method: str, params: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """Send one request and wait for its result (an `MCPError` for an error answer). `headers` is
        what an HTTP transport would send beside it: nothing a pipe carries."""
        stdin = self._stdin
        if self._closed or stdin is None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        request_id, message = raw_request(next(self._ids), method, params, self.server)
        try:
            line = pydantic_core.to_json(message) + b"\n"
        except ValueError as exc:  # anything else the encoder refuses: refused to the sender all the same
            raise not_sent(method, self.server, str(exc)) from None
        waiting = self._waiting[request_id] = _Waiting()
        written = False
        try:
            try:
                # A call given up on before it went out (its scope cancelled while shielded, say, as a
                # limiter's acquire is) never goes out, and needs no cancel either.
                await anyio.lowlevel.checkpoint_if_cancelled()
                written = True  # a write cancelled on its way may still have gone out whole: counts as sent
                await self._write(stdin, line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
            self.posts += 1
            if self.posts == 1:
                logger.info("server %r: plain tools/call requests go on the raw stdio leg", self.server)
            await waiting.done.wait()
        except anyio.get_cancelled_exc_class():
            if written:  # the server may be working on it: tell it to stop, as the SDK's client does
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
                    await self._cancel(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
        if waiting.error is not None:
            raise waiting.error
        assert waiting.result is not None
        return waiting.result

    async def _write(self, stdin: anyio.abc.ByteSendStream, line: bytes) -> None:
        writer = self._writer
        if writer is None:
            await stdin.send(line)
            return
        try:
            writer.write(line)
            await writer.drain()  # returns at once unless the pipe is full (or gone)
        except RuntimeError:  # uvloop's, on a closed pipe (as anyio's send allows for)
            raise anyio.BrokenResourceError from None

    def answered(self, message: Any) -> bool:
        """Take `message` (one the transport read) if it answers a request of this leg."""
        request_id = message.id
        if not isinstance(request_id, str) or not request_id.startswith(RAW_ID_PREFIX):
            return False
        if isinstance(message, JSONRPCResponse):
            self._settle(request_id, message.result, None)
        else:
            error = message.error
            self._settle(request_id, None, MCPError(code=error.code, message=error.message, data=error.data))
        return True

    def answered_line(self, line: bytes) -> bool:
        """Take `line` (one the server wrote, with its newline) if it is a well-formed answer to a request
        of this leg. Anything else, however close, is left to the SDK's reader (and so to `answered`)."""
        try:
            message = pydantic_core.from_json(line)  # the parser the SDK's reader uses
        except ValueError:
            return False
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            return False
        request_id = message.get("id")
        if type(request_id) is not str or not request_id.startswith(RAW_ID_PREFIX):
            return False
        keys = message.keys()
        result = error = None
        if keys == _RESULT_KEYS:
            result = message["result"]
            if type(result) is not dict:
                return False
        elif keys == _ERROR_KEYS:
            error = _error_of(message["error"])
            if error is None:
                return False
        else:
            return False
        self._settle(request_id, result, error)
        return True

    def _settle(self, request_id: str, result: dict[str, Any] | None, error: MCPError | None) -> None:
        """Wake the request `request_id` with its answer, the first one it gets; a later answer, or one to a
        request given up, is dropped (nobody else is waiting for it either)."""
        waiting = self._waiting.get(request_id)
        if waiting is not None and not waiting.done.is_set():
            waiting.result, waiting.error = result, error
            waiting.done.set()

    def close(self) -> None:
        """The connection is gone: every request still waiting fails as the SDK's own would."""
        self._closed = True
        for waiting in self._waiting.values():
            if not waiting.done.is_set():
                waiting.error = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
                waiting.done.set()

    async def _cancel(self, request_id: str) -> None:
        if self._stdin is None:
            return
        cancelled = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "caller cancelled"},
        }
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):  # gone: nothing to stop
            await self._write(self._stdin, pydantic_core.to_json(cancelled) + b"\n")


def _error_of(error: Any) -> MCPError | None:
    """The error a JSON-RPC `error` member says, when it has the shape the SDK's model requires."""
    if type(error) is not dict or not _ERROR_DATA_KEYS.issuperset(error):
        return None
    code, message = error.get("code"), error.get("message")
    if type(code) is not int or type(message) is not str:
        return None
    return MCPError(code=code, message=message, data=error.get("data"))


class _StdoutAnswers(anyio.abc.ByteReceiveStream):
    """A server's stdout, as the SDK's transport reads it, less the answers to the leg, which are taken
    here. It hands over whole lines only, so an answer is never split between the two readers: a line
    longer than `max_bytes` comes whole, in one piece (the SDK's reader splits what it reads into lines
    whatever the size)."""

    def __init__(self, inner: anyio.abc.ByteReceiveStream, leg: StdioLeg) -> None:
        self._inner = inner
        self._leg = leg
        self._lines = b""  # whole lines read and not yet handed over; the first may be an answer to take
        self._tail: list[bytes] = []  # the start of the line being read (a long line comes in many reads)
        self._handed = False  # lines went to the SDK's reader since an answer was last taken

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._lines:
                if self._handed:
                    # What went before goes first. The SDK's session takes each line it was handed and
                    # starts a task for a notification (one pass of the loop); that task then gets a pass
                    # of its own before this answer wakes its caller, as on the session's read stream, so
                    # a log the server wrote before its answer is relayed before the answer.
                    await anyio.lowlevel.checkpoint()
                    await anyio.lowlevel.checkpoint()
                    self._handed = False
                handed = self._hand_over()
                if handed:
                    return handed
            try:
                data = await self._inner.receive(max_bytes)
            except anyio.EndOfStream:
                rest = b"".join(self._tail)  # a last line with no newline: the SDK's reader decides
                self._tail.clear()
                if rest:
                    return rest
                raise
            end = data.rfind(b"\n") + 1
            if not end:
                self._tail.append(data)
                continue
            lines = data[:end]
            if self._tail:
                lines = b"".join([*self._tail, lines])
                self._tail.clear()
            if end < len(data):
                self._tail.append(data[end:])
            if _ANSWER_MARK not in lines:  # the usual read while no call is answered: all for the SDK
                self._handed = True
                return lines
            self._lines = lines

    def _hand_over(self) -> bytes:
        """Take the leg's answers at the front of the lines read, then hand over what follows, up to the
        next line that may be one (b"" when every line was an answer)."""
        lines, size, position = self._lines, len(self._lines), 0
        while position < size:
            end = lines.index(b"\n", position) + 1
            if lines.find(_ANSWER_MARK, position, end) < 0 or not self._leg.answered_line(lines[position:end]):
                break
            position = end
        start = position
        while position < size:
            end = lines.index(b"\n", position) + 1
            if position > start and lines.find(_ANSWER_MARK, position, end) >= 0:
                break
            position = end
        self._lines = lines[position:]
        if position > start:
            self._handed = True
        return lines[start:position]

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self._inner.extra_attributes


class _Answers(anyio.abc.ObjectReceiveStream[Any]):
    """The session's read stream, less the answers to the leg's requests (taken in the session's own
    receive loop, so in the order the server wrote them)."""

    def __init__(self, inner: Any, leg: StdioLeg) -> None:
        self._inner = inner
        self._leg = leg

    async def receive(self) -> Any:
        answered = self._leg.answered
        try:
            while True:
                item = await self._inner.receive()
                message = getattr(item, "message", None)
                if (type(message) is JSONRPCResponse or type(message) is JSONRPCError) and answered(message):
                    continue
                return item
        except BaseException:
            # The end of the stream (or of its reader) is the end of the connection for the leg too.
            self._leg.close()
            raise

    async def aclose(self) -> None:
        self._leg.close()
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # what else the SDK may read off its stream (`last_context`)
