"""What a server sends a call's client while the call runs (progress, log messages, questions), bounded
per call.

The SDK's client handles each notification a server sends in a task of its own, which waits there until
the client's stream takes the message. A server sending faster than its client took them piled those
tasks up, each holding its message, for as long as the call ran: 20,000 log messages of 20 kB in one call
whose client read slowly took the gateway from 83 MB to 1.5 GB, and more would have taken all of its
memory (progress alike). Now one call's messages waiting to be taken are held to `MOST_BYTES` and
`MOST_MESSAGES`; what comes past that is dropped until the client takes some (a progress message is
overtaken by the next anyway), and the gateway's log says so once per call. A burst that fits (a
server's thousand log lines) is sent whole, as before, however slowly the client reads.

Questions (sampling, elicitation, roots) wait for their answers the same way: a server asking 5,000
elicitations at once had every one passed on, and waiting in the gateway for a person to answer (76 to
473 MB in ten seconds). At most `MOST_QUESTIONS` of a call's questions (or, outside any call, of one
client's) wait at once; a server asking more gets an error for each, saying so.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import pydantic_core

logger = logging.getLogger(__name__)

MOST_BYTES = 4 << 20  # of one call's messages waiting to be taken (about: their data's JSON)
MOST_MESSAGES = 4096  # however small
MOST_QUESTIONS = 16  # of one call's questions to its client waiting for an answer (servers ask one at a time)
_PROGRESS_BYTES = 100  # a progress message, less its text

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


class _Waiting:
    """One call's messages on their way to its client, and its questions waiting for an answer."""

    __slots__ = ("bytes", "dropped", "messages", "questions")

    def __init__(self) -> None:
        self.bytes = 0
        self.messages = 0
        self.dropped = 0
        self.questions = 0


# By the call's request (the `Request` a backend is `serving`; a `Caller` outside any call): forgotten with it.
_calls: weakref.WeakKeyDictionary[Any, _Waiting] = weakref.WeakKeyDictionary()


def _waiting(request: Any) -> _Waiting:
    waiting = _calls.get(request)
    if waiting is None:
        waiting = _calls[request] = _Waiting()
    return waiting


async def relay(request: Any, size: int, send: Callable[[], Awaitable[None]], server: str) -> None:
    """`send()` a message of about `size` bytes from `server` to the client of `request`, or drop it while
    that call's messages waiting to be taken are at the bounds (one message alone is always sent)."""
    waiting = _waiting(request)
    if waiting.messages and (waiting.messages >= MOST_MESSAGES or waiting.bytes + size > MOST_BYTES):
        if not waiting.dropped:
            logger.warning(
                "server %r sends a call's client progress or log messages faster than the client takes them: "
                "while %d of them (%d bytes) wait, what comes next is dropped",
                server,
                waiting.messages,
                waiting.bytes,
            )
        waiting.dropped += 1
        return
    waiting.messages += 1
    waiting.bytes += size
    try:
        await send()
    finally:
        waiting.messages -= 1
        waiting.bytes -= size


def log_size(data: Any) -> int:
    """About how many bytes a log message's `data` takes to send."""
    try:
        return len(pydantic_core.to_json(data))
    except (ValueError, RecursionError):  # what no wire carries is refused when it is sent
        return 0


def relayed_progress(request: Any, server: str) -> Progress:
    """A progress callback passing `server`'s progress on to `request`'s client, through `relay`."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        size = _PROGRESS_BYTES + len(message or "")
        await relay(request, size, lambda: request.progress(value, total, message), server)

    return progress


async def ask_within(request: Any, method: str, ask: Callable[[], Awaitable[Any]]) -> Any:
    """`ask()` the client of `request` (a call's, or a `Caller`) the server's question `method`, or refuse it
    with an error while `MOST_QUESTIONS` of that call's questions wait for an answer."""
    waiting = _waiting(request)
    if waiting.questions >= MOST_QUESTIONS:
        return types.ErrorData(
            code=types.INVALID_REQUEST,
            message=f"{method}: {MOST_QUESTIONS} questions of this call already wait for the client's answer; "
            "ask again once it has answered one",
        )
    waiting.questions += 1
    try:
        return await ask()
    finally:
        waiting.questions -= 1
