"""A bound on one answer of a remote (HTTP) server, as a stdio server's lines are bounded (`processes`).

The SDK's streamable HTTP and SSE clients, and the raw leg, read a JSON answer whole (`response.aread()`):
with nothing to stop it, one answer of 5 GB would take the gateway's memory with it. An event stream is
read event by event, and the SDK's reader bounds each event (1 MiB), so a long-lived stream of small
events is never cut for its total. Everything else a server sends is counted here as it is read,
*decoded*: httpx decodes gzip and deflate above the transport, and a 1 MB gzip answer can be 1 GB once
decoded. Past `max_answer_bytes` the read fails with `AnswerTooLarge` and the connection is closed; that
one request fails, the session and the other calls go on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

logger = logging.getLogger(__name__)

ResponseHook = Callable[[httpx2.Response], Awaitable[None]]


class AnswerTooLarge(httpx2.StreamError):
    """An answer passed `max_answer_bytes`. A `StreamError` because that is what the SDK's readers take as
    one answer that could not be read (that request fails, not the session)."""


def size_words(limit: int) -> str:
    """`limit` as a person reads it: whole megabytes when it is some, else bytes."""
    return f"{limit >> 20} MB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"


def answer_bound(limit: int, server: str, *, streams_on_post: bool = True) -> ResponseHook:
    """A response hook for a backend's HTTP client that bounds each answer `server` sends to `limit` bytes.

    Left to the SDK's event reader: a 200 event stream answering a GET (a listen stream) and, where
    `streams_on_post` (streamable HTTP), a POST. The SSE transport's POST answers are read whole (the
    SDK's `request_within_origin`), so its client bounds them whatever their type.
    """

    async def bound(response: httpx2.Response) -> None:
        # Run for every answer (a plain call's too): the fewest header lookups first, for the usual answer.
        headers = response.headers
        encoding = headers.get("content-encoding")
        if encoding is None:
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) <= limit:
                return  # bounded as it is: HTTP/1.1 framing reads no more than the length said (most answers)
        if (
            response.status_code == 200
            and headers.get("content-type", "").lower().startswith("text/event-stream")
            and (streams_on_post or response.request.method == "GET")
        ):
            return
        if encoding is not None:  # decoded here, counted as decoded; the response reads it as it is
            del headers["content-encoding"]
        response.stream = _BoundedBody(response.stream, encoding, limit, server)

    return bound


class _BoundedBody(httpx2.AsyncByteStream):
    """A response's body, decoded, that fails once it passes `limit` bytes."""

    def __init__(self, raw: httpx2.AsyncByteStream, encoding: str | None, limit: int, server: str) -> None:
        self._raw = raw
        # httpx's own decoders, through a response that holds only the body and its encoding.
        self._decoded = (
            None if encoding is None else httpx2.Response(200, headers={"content-encoding": encoding}, stream=raw)
        )
        self._limit = limit
        self._server = server

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._raw if self._decoded is None else self._decoded.aiter_bytes():
            read += len(chunk)
            if read > self._limit:
                limit = size_words(self._limit)
                logger.warning("server %r: an answer passed %s (max_answer_bytes), not read", self._server, limit)
                raise AnswerTooLarge(f"the answer is larger than {limit} (max_answer_bytes); it was not read")
            yield chunk

    async def aclose(self) -> None:
        await (self._raw.aclose() if self._decoded is None else self._decoded.aclose())
