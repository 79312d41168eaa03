"""A bound on one answer of a remote (HTTP) server, as a stdio server's lines are bounded (`processes`).

The SDK's streamable HTTP and SSE clients, and the raw leg, read a JSON answer whole (`response.aread()`):
with nothing to stop it, one answer of 5 GB would take the gateway's memory with it. An event stream is
read event by event, and the SDK's reader bounds each event (1 MiB), so a long-lived stream of small
events is never cut for its total. Everything else a server sends is counted here as it is read,
*decoded*: httpx decodes gzip and deflate above the transport, and a 1 MB gzip answer can be 1 GB once
decoded. Past `max_answer_bytes` the read fails with `AnswerTooLarge` and the connection is closed; that
one request fails, the session and the other calls go on.

Bytes are not the whole cost: parsed, an object or array costs the gateway about 250 bytes however short it
is on the wire (`{}`: 2), so 7.8 MB of them took it to 970 MB, parsed on the event loop. An answer past
64 KiB may hold one `{` or `[` per 64 bytes of `max_answer_bytes` (brackets in strings count too: a bound,
counted in C), on stdio (`processes.BoundedLines`) as here.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

logger = logging.getLogger(__name__)

ResponseHook = Callable[[httpx2.Response], Awaitable[None]]

COUNTED_PAST = 64 << 10  # answers shorter than this hold too few brackets to matter: never counted
CONTAINER_BYTES = 64  # an answer may hold one object or array per this many bytes of `max_answer_bytes`


def most_containers(limit: int) -> int:
    """How many objects and arrays an answer past `COUNTED_PAST` may hold, for a `max_answer_bytes` of `limit`."""
    return limit // CONTAINER_BYTES


def containers_in(data: bytes, start: int = 0, end: int | None = None) -> int:
    """The objects and arrays `data[start:end]` opens, at most (in C: `bytes.count`, no copy of the slice)."""
    return data.count(b"{", start, end) + data.count(b"[", start, end)


def too_many_containers(limit: int) -> str:
    """Why an answer was refused for the objects it holds, naming the setting."""
    return (
        f"more than {most_containers(limit)} objects and arrays (one per {CONTAINER_BYTES} bytes of max_answer_bytes)"
    )


class AnswerTooLarge(httpx2.StreamError):
    """An answer passed `max_answer_bytes`. A `StreamError` because that is what the SDK's readers take as
    one answer that could not be read (that request fails, not the session)."""


def size_words(limit: int) -> str:
    """`limit` as a person reads it: whole megabytes when it is some, else bytes."""
    return f"{limit >> 20} MB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"


def answer_bound(limit: int, server: str, *, streams_on_post: bool = True) -> ResponseHook:
    """A response hook for a backend's HTTP client that bounds each answer `server` sends to `limit` bytes, and
    one past `COUNTED_PAST` to `most_containers(limit)` objects and arrays.

    Left to the SDK's event reader: a 200 event stream answering a GET (a listen stream) and, where
    `streams_on_post` (streamable HTTP), a POST. The SSE transport's POST answers are read whole (the
    SDK's `request_within_origin`), so its client bounds them whatever their type.
    """

    uncounted = min(limit, COUNTED_PAST)

    async def bound(response: httpx2.Response) -> None:
        # Run for every answer (a plain call's too): the fewest header lookups first, for the usual answer.
        headers = response.headers
        encoding = headers.get("content-encoding")
        if encoding is None:
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) <= uncounted:
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
    """A response's body, decoded, that fails once it passes `limit` bytes, or `COUNTED_PAST` bytes holding more
    than `most_containers(limit)` objects and arrays. An event stream of events past 64 KiB is not counted
    here: the SDK's reader bounds each event to 1 MiB, under the count a 64 MB bound allows."""

    def __init__(self, raw: httpx2.AsyncByteStream, encoding: str | None, limit: int, server: str) -> None:
        self._raw = raw
        # httpx's own decoders, through a response that holds only the body and its encoding.
        self._decoded = (
            None if encoding is None else httpx2.Response(200, headers={"content-encoding": encoding}, stream=raw)
        )
        self._limit = limit
        self._server = server

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = containers = 0
        most = most_containers(self._limit)
        async for chunk in self._raw if self._decoded is None else self._decoded.aiter_bytes():
            read += len(chunk)
            if read > self._limit:
                limit = size_words(self._limit)
                logger.warning("server %r: an answer passed %s (max_answer_bytes), not read", self._server, limit)
                raise AnswerTooLarge(f"the answer is larger than {limit} (max_answer_bytes); it was not read")
            containers += containers_in(chunk)
            if containers > most and read > COUNTED_PAST:
                why = too_many_containers(self._limit)
                logger.warning("server %r: an answer held %s, not read", self._server, why)
                raise AnswerTooLarge(f"the answer holds {why}; it was not read")
            yield chunk

    async def aclose(self) -> None:
        await (self._raw.aclose() if self._decoded is None else self._decoded.aclose())
