"""HTTP: a connection must finish each request's line and headers within `header_timeout` seconds.

uvicorn keeps a connection that never finishes its request headers for ever: its only timer is the
keep-alive one, between requests, and the first byte cancels it. So anyone who can reach the port, with no
credential (authentication needs the headers), could open connections and send a few bytes now and then
until the gateway had no file descriptors left, and then nobody was served. Here each connection has
`header_timeout` seconds from when it opens, or its next request begins, to the end of that request's
headers, else it is closed. The body and the answer are not timed here: a long call streams as long as it runs.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _HeaderDeadline(HttpToolsProtocol):
    header_timeout: float = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_deadline is None:  # a later request on a kept-alive connection
            self._start_header_deadline()

    def on_headers_complete(self) -> None:
        self._stop_header_deadline()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_deadline()
        super().connection_lost(exc)

    def _start_header_deadline(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _stop_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def header_deadline_protocol(timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP/1.1 protocol (httptools, a dependency), closing a connection slow to send its headers."""
    return type("HeaderDeadlineProtocol", (_HeaderDeadline,), {"header_timeout": timeout})
