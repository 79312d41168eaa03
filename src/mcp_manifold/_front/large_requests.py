"""Large request bodies in flight over HTTP, bounded together by what they may cost in memory.

A request's body is parsed into Python objects, held while its call runs and encoded again for its
server. Measured (2026-07-28 `tools/call`s through the lane): a 4 MiB body of one string cost the gateway
about 25 MB, one of 1.4 million `{}` about 280 MB. The SDK bounds one body (4 MiB), nothing bounds them
together: ten such calls at once took the gateway from 40 MB to 2.2 GB, so a few dozen from one client
ended it, and every other client's calls with it.

So a POST whose body is large (`LARGE` bytes or more, or of unknown length) is read first, its cost
estimated from its size and its brackets (`estimated_cost`), and it goes on once that fits beside the
large requests in flight within `request_memory_mb`; else it waits, in turn, and after `WAIT` seconds is
answered 503. A request that alone costs more than the whole budget goes on when no other large one is
in flight. Smaller requests are not counted and never wait: they cost little, and their number is what
`principal_max_calls` and `rate_limit` bound.
"""

from __future__ import annotations

import logging
from collections import deque

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._front.json_answers import send_error

logger = logging.getLogger(__name__)

LARGE = 64 * 1024  # bytes of body from which a request is counted
PER_BYTE = 6  # bytes of memory per byte of body, for a body of strings (25 MB for 4 MiB)
PER_CONTAINER = 200  # bytes of memory per object or array (280 MB for 1.4 million `{}`)
WAIT = 30.0  # seconds a large request waits for room at most


def estimated_cost(body: bytes) -> int:
    """What `body` may cost the gateway's memory while its request runs: its bytes, and its objects and
    arrays counted as brackets (in C; brackets inside strings count too, so this errs high)."""
    return len(body) * PER_BYTE + (body.count(b"{") + body.count(b"[")) * PER_CONTAINER


class MemoryBudget:
    """`total` bytes shared by the large requests in flight, given in the order asked for."""

    def __init__(self, total: int, wait: float = WAIT) -> None:
        self.total = total
        self.wait = wait
        self.held = 0
        self._waiting: deque[tuple[int, anyio.Event]] = deque()

    async def acquire(self, cost: int) -> None:
        """Hold `cost` bytes once they fit (a cost over `total` fits when nothing is held), waiting in turn;
        `TimeoutError` after `wait` seconds."""
        if not self._waiting and self._fits(cost):
            self.held += cost
            return
        turn = (cost, anyio.Event())
        self._waiting.append(turn)
        try:
            with anyio.fail_after(self.wait):
                await turn[1].wait()
        except BaseException:
            if turn[1].is_set():  # given meanwhile: given back
                self.release(cost)
            else:
                self._waiting.remove(turn)
                self._give()  # a smaller request behind this one may fit now
            raise

    def release(self, cost: int) -> None:
        self.held -= cost
        self._give()

    def _fits(self, cost: int) -> bool:
        return self.held == 0 or self.held + cost <= self.total

    def _give(self) -> None:
        while self._waiting and self._fits(self._waiting[0][0]):
            cost, given = self._waiting.popleft()
            self.held += cost
            given.set()


class LargeRequests:
    """The ASGI layer that admits large POST bodies within a `MemoryBudget`."""

    def __init__(self, app: ASGIApp, budget: MemoryBudget, max_body: int) -> None:
        self.app = app
        self.budget = budget
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        # Small bodies go on untouched; so does one over the SDK's bound, which it refuses unread.
        if length is not None and (not length.isdigit() or not LARGE <= int(length) <= self.max_body):
            await self.app(scope, receive, send)
            return
        body, complete, replay = await read_body(receive, self.max_body)
        if not complete or len(body) < LARGE:
            await self.app(scope, replay, send)
            return
        cost = estimated_cost(body)
        try:
            await self.budget.acquire(cost)
        except TimeoutError:
            await _busy(send, self.budget)
            return
        try:
            await self.app(scope, replay, send)
        finally:
            self.budget.release(cost)


def _content_length(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value  # type: ignore[no-any-return]
    return None


async def _busy(send: Send, budget: MemoryBudget) -> None:
    megabytes, waited = budget.total // (1024 * 1024), f"{budget.wait:g}s"
    message = (
        f"the gateway is busy with other large requests (request_memory_mb {megabytes}); this one waited "
        f"{waited} for room: retry it later, or send smaller requests"
    )
    logger.info("HTTP: a large request refused after waiting %s for room (request_memory_mb %d)", waited, megabytes)
    await send_error(send, 503, -32000, message, [(b"retry-after", b"5")])


async def read_body(receive: Receive, limit: int) -> tuple[bytes, bool, Receive]:
    """The request's body, whether all of it came, and a `receive` that gives it again (for the SDK path)
    before the rest. An incomplete body (its client hung up first, or more than `limit` bytes came: a
    chunked body, which the SDK refuses) is replayed as incomplete, so the SDK's path meets the rest."""
    chunks = []
    complete = False
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            complete = size <= limit
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return body, complete, replay
