"""A cancellation that nothing around a request asked for ends that request with an error, nothing more.

anyio cancels a whole task group when one of its tasks ends in a cancellation that none of the group's
scopes asked for. Over stdio that group is the client's connection: a single request meeting such a
cancellation (a bug of ours, or a cancel from code outside anyio) would end the gateway without a word,
as a held call once did (`_runtime/input_bridge.py`). The requests the stdio front serves (the SDK
server's and the fast lane's) are guarded here, with `_runtime/cancellation.py`'s test; a cancellation
that a scope around the request did ask for (its client's cancel, the gateway stopping) goes on as it
must.
"""

from __future__ import annotations

import logging

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_manifold._runtime.cancellation import stray_cancellation

logger = logging.getLogger(__name__)

FAILED = "the request failed in the gateway"


def log_stray(what: str) -> None:
    logger.error("%s ended by a cancellation nothing asked for; answered as an internal error", what)


async def refusing_stray_cancellations(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
    """The SDK server's middleware: such a cancellation becomes the request's internal error."""
    try:
        return await call_next(ctx)
    except BaseException as exc:
        if not stray_cancellation(exc):
            raise
        log_stray(ctx.method)
        # A request its client cancelled meanwhile gets no answer all the same (the SDK sends none).
        raise MCPError(code=types.INTERNAL_ERROR, message=FAILED) from None
