"""A cancellation that nothing around a request asked for ends that request with an error, nothing more.

anyio cancels a whole task group when one of its tasks ends in a cancellation that none of the group's
scopes asked for. Over stdio that group is the client's connection: a single request meeting such a
cancellation (a bug of ours, or a cancel from code outside anyio) would end the gateway without a word,
as a held call once did (`_runtime/input_bridge.py`). The requests the stdio front serves (the SDK
server's and the fast lane's) are guarded here; a cancellation that a scope around the request did ask
for (its client's cancel, the gateway stopping) goes on as it must.
"""

from __future__ import annotations

import logging

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

logger = logging.getLogger(__name__)

FAILED = "the request failed in the gateway"


def asked_for() -> bool:
    """In an `except` for a cancellation: whether a scope around this code was cancelled (so the
    cancellation is the request's own, or the gateway's stopping) rather than one nothing asked for."""
    return anyio.current_effective_deadline() == float("-inf")


def log_stray(what: str) -> None:
    logger.error("%s ended by a cancellation nothing asked for; answered as an internal error", what)


async def refusing_stray_cancellations(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
    """The SDK server's middleware: such a cancellation becomes the request's internal error."""
    try:
        return await call_next(ctx)
    except anyio.get_cancelled_exc_class():
        if asked_for():
            raise
        log_stray(f"request {ctx.request_id!r}")
        raise MCPError(code=types.INTERNAL_ERROR, message=FAILED) from None
