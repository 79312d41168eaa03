"""A plain `tools/call` to a stdio server written straight to its stdin, its answer taken off the session's
read stream, outside the SDK's request machinery.

The SDK's client sends a request by building its model, parking a pair of memory streams for the
answer, opening a tracing span, handing the model to its transport's writer task (which dumps it to
JSON) and waking the caller from its dispatcher task when the answer comes: three task switches and
two model round trips per call, about a fifth of the gateway's CPU for a plain call over HTTP. This
leg writes the request the session stamped (the same `_meta`) as one JSON line on the server's stdin,
beside the SDK's writer (each message is one write, so lines never interleave), and picks its answer
out of what the SDK's transport read, in the session's own receive loop: so whatever the server sent
before the answer (a log message, a request) is handled first, exactly as on the SDK's path.

Everything else (the handshake, listings, notifications, the server's requests and their answers,
the process's life) stays with the SDK's transport and session. Request ids are strings
(`outbound.raw_request`): the session numbers its own requests, and the two never meet.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, JSONRPCError, JSONRPCResponse

from mcp_manifold._runtime.outbound import RAW_ID_PREFIX, not_sent, raw_request

logger = logging.getLogger(__name__)

_CANCEL_TIMEOUT = 2.0  # seconds a courtesy cancel may take to write before it is given up


class _Waiting:
    """One request on the leg: set once, with its result or the error it becomes."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: dict[str, Any] | None = None
        self.error: MCPError | None = None


class StdioLeg:
    """The raw leg of one stdio backend session: the server's stdin and the requests waiting on it."""

    def __init__(self, stdin: anyio.abc.ByteSendStream, server: str) -> None:
        self.server = server
        self.posts = 0  # requests written on this leg
        self._stdin = stdin
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Waiting] = {}
        self._closed = False

    def reading(self, read: Any) -> _Answers:
        """`read` (the transport's stream to the session) with this leg's answers taken out of it."""
        return _Answers(read, self)

    async def post(
        self, method: str, params: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """Send one request and wait for its result (an `MCPError` for an error answer). `headers` is
        what an HTTP transport would send beside it: nothing a pipe carries."""
        if self._closed:
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
                written = True  # a write cancelled on its way may still have gone out whole: counts as sent
                await self._stdin.send(line)
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

    def answered(self, message: Any) -> bool:
        """Take `message` (one the transport read) if it answers a request of this leg."""
        request_id = message.id
        if not isinstance(request_id, str) or not request_id.startswith(RAW_ID_PREFIX):
            return False
        waiting = self._waiting.get(request_id)
        if waiting is None:
            return True  # a late answer to a request given up: nobody else is waiting for it either
        if isinstance(message, JSONRPCResponse):
            waiting.result = message.result
        else:
            error = message.error
            waiting.error = MCPError(code=error.code, message=error.message, data=error.data)
        waiting.done.set()
        return True

    def close(self) -> None:
        """The connection is gone: every request still waiting fails as the SDK's own would."""
        self._closed = True
        for waiting in self._waiting.values():
            if not waiting.done.is_set():
                waiting.error = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
                waiting.done.set()

    async def _cancel(self, request_id: str) -> None:
        cancelled = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "caller cancelled"},
        }
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):  # gone: nothing to stop
            await self._stdin.send(pydantic_core.to_json(cancelled) + b"\n")


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
