"""A lane call's answer on its way out to an HTTP client, as the SDK's path sends one (`Reply`).

Most calls answer at once: one `application/json` response. While a call runs, what the SDK's path does
is done here too: a session-era server's log message goes out as it comes, on the response's own event
stream; a call silent for the SDK's window streams, with a ping each window, so an idle-read timeout on
the way never cuts it; a 2026-07-28 client that hangs up cancels its call (that era's only cancel over
HTTP). The HTTP lane (`_front/http_lane.py`) decides which calls are its own and makes them.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from starlette.types import Receive, Send

from mcp_manifold._runtime.cancellation import stray_cancellation

logger = logging.getLogger(__name__)

# The SDK's 2026-07-28 path: a call silent this long (seconds) streams, pinged each window after.
PING_WINDOW = 15.0
MIND_AFTER = 0.5  # seconds a call runs before its client's connection is watched (most have finished by then)
_PING = b": ping\r\n\r\n"
_STREAM_HEADERS = [  # what the SDK's path opens a response's event stream with
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


class Reply:
    """A lane call's answer on its way out: one JSON body when the answer comes first, as for most calls.
    Otherwise an event stream, as the SDK's path sends one: from the first message the server sends
    mid-call (session era), or once the call has been silent for the SDK's window, with a ping each window
    after, so that an idle-read timeout between client and gateway never cuts a long call. Sends may come
    from the call's task, a log's and the minder's (`mind`): the lock, made once a second one may send,
    keeps them whole and in order."""

    def __init__(self, send: Send, modern: bool, session_id: bytes | None) -> None:
        self._send = send
        self.modern = modern
        self.session_id = session_id
        self.call = anyio.CancelScope()  # the call's own: its client's cancel, or its hanging up (2026-07-28)
        self.minder: anyio.CancelScope | None = None  # the minder's, once it is started
        self.cancelled_for: str | None = None  # why the call was cancelled (see `cancel`)
        self.streaming = False
        self.finished = False
        self._lock: anyio.Lock | None = None

    def cancel(self, reason: Literal["client", "hung up", "session ended"]) -> None:
        """Stop the call: its client cancelled it (it is answered so), hung up (nobody to answer), or
        ended its session (the response ends unanswered)."""
        if self.cancelled_for is None:
            self.cancelled_for = reason
            self.call.cancel()

    async def mind(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """While the call runs on: its client hanging up cancels it at 2026-07-28, where that is the only
        cancel there is (the SDK's path does the same; in a session the call goes on, as there); a call
        silent for a window streams, pinged each window."""
        with scope:
            try:
                await self._mind(receive)
            except Exception:  # it runs in the gateway's task group: whatever happens ends this call's minding only
                logger.exception("HTTP fast lane: minding a call failed; the call goes on unminded")
            except BaseException as exc:  # one nothing asked for would end the gateway's task group
                if not stray_cancellation(exc):
                    raise
                logger.error("HTTP fast lane: minding a call ended by a cancellation nothing asked for")

    async def _mind(self, receive: Receive) -> None:
        wait = PING_WINDOW - MIND_AFTER
        while True:
            with anyio.move_on_after(wait):
                if (await receive())["type"] == "http.disconnect":
                    if self.modern and not self.finished:  # (after the answer, the end of the response)
                        self.cancel("hung up")
                    return
                continue
            await self.stream(_PING)
            wait = PING_WINDOW

    async def stream(self, chunk: bytes) -> None:
        """`chunk` (an event, or a ping) on the response's event stream, opened first if need be."""
        async with self._sending():
            if self.finished:
                return  # the answer went: what comes after it has no stream to go on
            if not self.streaming:
                self.streaming = True
                await self._send({"type": "http.response.start", "status": 200, "headers": self._stream_headers()})
            await self._send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end_unanswered(self) -> None:
        """End the response without an answer, as the SDK's path ends the event stream of a call whose
        session ended."""
        async with self._sending():
            if self.finished:
                return
            self.finished = True
            if not self.streaming:
                await self._send({"type": "http.response.start", "status": 200, "headers": self._stream_headers()})
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    def _sending(self) -> anyio.Lock:
        """The lock of the sends, made when a second task may send (a log's, or the minder's)."""
        if self._lock is None:
            self._lock = anyio.Lock(fast_acquire=True)
        return self._lock

    def _stream_headers(self) -> list[tuple[bytes, bytes]]:
        headers = [*_STREAM_HEADERS]
        if self.session_id is not None and not self.modern:
            headers.append((MCP_SESSION_ID_HEADER.encode(), self.session_id))
        return headers

    async def finish(self, response: dict[str, Any], body: bytes) -> None:
        """The answer: the stream's last event, or the whole response."""
        if self.finished:
            return
        if self._lock is None:  # nobody else has sent, nor can now: the answer alone
            self.finished = True
            await _respond(self._send, response, body, self.modern, self.session_id)
            return
        async with self._lock:
            if self.finished:
                return
            self.finished = True
            if self.streaming:
                await self._send({"type": "http.response.body", "body": event(body), "more_body": False})
            else:
                await _respond(self._send, response, body, self.modern, self.session_id)


async def _respond(send: Send, response: dict[str, Any], body: bytes, modern: bool, session_id: bytes | None) -> None:
    """`response`, as `body` (serialized as the SDK would for the era), sent as `application/json`."""
    error = response.get("error")
    status = ERROR_CODE_HTTP_STATUS.get(error["code"], 200) if modern and error else 200
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if session_id is not None and not modern:
        headers.append((MCP_SESSION_ID_HEADER.encode(), session_id))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def event(message: bytes) -> bytes:
    return b"event: message\r\ndata: " + message + b"\r\n\r\n"
