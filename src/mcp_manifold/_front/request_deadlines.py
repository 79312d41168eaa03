"""HTTP: a connection must send each request's line and headers within `header_timeout` seconds, and then
its body within `body_timeout`, or it is closed.

uvicorn keeps a connection that never finishes its request for ever: its only timer is the keep-alive one,
between requests, and the first byte cancels it. So anyone who could reach the port, with no credential
(authentication needs the headers), could open connections and send a byte now and then until the gateway
had no file descriptors left, and then nobody was served; a client with a credential could do the same with
bodies. Here the headers are timed from when the connection opens, or its next request begins, and the body
from the end of the headers. The answer is not timed here: a long call streams for as long as it runs.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _RequestDeadlines(HttpToolsProtocol):
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    # When the connection is closed unless its request is in by then (None: no request in progress), and the
    # one timer that checks it. Moving the deadline moves no timer: the timer, when it fires, looks again and
    # waits for the deadline then. Starting and cancelling two timers per request cost about 4 µs with uvloop.
    _deadline: float | None = None
    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start(self.header_timeout)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a later request on a kept-alive connection
            self._start(self.header_timeout)

    def on_headers_complete(self) -> None:
        self._start(self.body_timeout)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._deadline = None
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def _start(self, seconds: float) -> None:
        self._deadline = self.loop.time() + seconds
        if self._timer is None:
            self._timer = self.loop.call_at(self._deadline, self._check)

    def _check(self) -> None:
        self._timer = None
        if self._deadline is None:  # no request in progress: the next one starts a timer
            return
        if self.loop.time() < self._deadline:  # the deadline moved on since this timer was set
            self._timer = self.loop.call_at(self._deadline, self._check)
            return
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def request_deadline_protocol(header_timeout: float, body_timeout: float) -> type[HttpToolsProtocol]:
    """uvicorn's HTTP/1.1 protocol (httptools, a dependency), closing a connection slow to send its request."""
    timeouts = {"header_timeout": header_timeout, "body_timeout": body_timeout}
    return type("RequestDeadlineProtocol", (_RequestDeadlines,), timeouts)
