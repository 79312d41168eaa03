"""uvicorn's HTTP protocol with a response's head and its first body bytes sent in one write.

uvicorn writes a response's status line and headers as soon as the app starts the response, then the
body when the app sends it: two system calls, and two TCP segments the client reads apart, for every
answer. A plain JSON answer sends both in the same pass of the event loop, so the head is held until the
next write on the connection and goes out with it. If none comes in that pass (an event stream that
starts and then waits), it goes out alone at the end of the pass: nothing waits longer than that, and
the bytes keep their order.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_HEAD = b"HTTP/1."  # how uvicorn's head of a response starts, and nothing else it writes
_JOIN_BELOW = 64 * 1024  # smaller parts are copied into one buffer; larger ones go out as a vector


class _HeldHeadTransport:
    """The connection's transport; a response head waits for the next write (or the end of the pass)."""

    __slots__ = ("_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._loop = loop

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if len(data) < _JOIN_BELOW:
                self._transport.write(head + data)
            else:
                self._transport.writelines((head, data))
        elif data.startswith(_HEAD):
            self._head = data
            self._loop.call_soon(self._send_head)
        else:
            self._transport.write(data)

    def _send_head(self) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self._send_head()  # a response that ends the connection still reaches its client
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over `_HeldHeadTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_HeldHeadTransport(transport, self.loop))  # type: ignore[arg-type]
