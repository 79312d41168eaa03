"""The stream of messages to a server, refusing what no wire can carry before the SDK's writer sees it.

The SDK's transports encode each message in one writer task per connection; a message that cannot be
encoded (a lone surrogate in a string: `"\\ud800"`) ends that task, and with it the connection, every
caller's calls in flight on it, and (for stdio) the server's process. The call path refuses such input
from clients already (`_core/arguments.py`); this is the second line, for whatever else a gateway sends
a server: a client's answer to the server's question, a notification, a request from elsewhere.
A request is refused to its sender (`InvalidRequest`), an answer is replaced by a JSON-RPC error (the
server is never left waiting), and a notification is dropped with a log line.

A request's `arguments` that the call path has checked already (`mark_checked`: that very object, or
a copy equal to it, in the same context) are not walked twice; the rest of the request (name, `_meta`,
...) always is. (Equal to a sendable value is sendable: equality keeps every type JSON has, and NaN,
the one float a walk refuses that could compare equal, is never in a checked value.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from mcp_manifold._core.arguments import MAX_DEPTH, encoding_problem
from mcp_manifold._errors import InvalidRequest

logger = logging.getLogger(__name__)

# A message's own levels (params, arguments, ...) around the client's value, which the call path limits.
_ENVELOPE_LEVELS = 8

# The arguments the call path last checked in this context, held (not an id, which a later object may
# reuse) so that only this very object is skipped.
_checked_arguments: ContextVar[Any] = ContextVar("manifold_checked_arguments", default=None)

# `mark_checked(arguments)`: say that `arguments`, about to be sent as a request's `arguments` from this
# context, passed `encoding_problem` and will not change before they are sent; the writer then skips
# their walk. `mark_checked(None)` takes the mark back. (The ContextVar's own setter: no Python frame.)
mark_checked: Callable[[Any], object] = _checked_arguments.set


class EncodableWrites:
    """Wraps a transport's write stream (the SDK's `WriteStream[SessionMessage]`) for server `server`."""

    def __init__(self, stream: Any, server: str) -> None:
        self._stream = stream
        self._server = server

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        problem = _problem(message)
        if problem is None:
            await self._stream.send(item)
        elif isinstance(message, types.JSONRPCRequest):
            raise not_sent(message.method, self._server, problem)
        elif isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            logger.warning(
                "server %r: an answer to its request %r could not be encoded: %s", self._server, message.id, problem
            )
            error = types.ErrorData(code=types.INTERNAL_ERROR, message=f"the answer could not be encoded: {problem}")
            await self._stream.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
        else:
            logger.warning("server %r: %s not sent: %s", self._server, message.method, problem)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)  # close, aclose, clone, statistics: the stream's own

    async def __aenter__(self) -> EncodableWrites:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._stream.__aexit__(*exc_info)


# A raw leg's request ids (`_runtime/http_leg.py`, `stdio_leg.py`): strings, so that they never meet the
# integers the SDK's session numbers its own requests with on the same connection.
RAW_ID_PREFIX = "manifold-"


def raw_request(number: int, method: str, params: Mapping[str, Any] | None, server: str) -> tuple[str, dict[str, Any]]:
    """A raw leg's request `number` to `server`: its id and its JSON-RPC message. Refused to its sender
    (`InvalidRequest`), as on the SDK's path, when `params` hold what no wire can carry."""
    problem = params_problem(params)
    if problem is not None:
        raise not_sent(method, server, problem)
    request_id = f"{RAW_ID_PREFIX}{number}"
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return request_id, message


def not_sent(method: str, server: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"{method} was not sent to server {server!r}: {problem}")


def params_problem(params: Mapping[str, Any] | None) -> str | None:
    """What in a request's `params` no wire can carry (None: all of it can), the checked arguments skipped."""
    if not params or _params_sendable(params):
        return None
    checked = _checked_arguments.get()  # not walked again to name the place: the problem is elsewhere
    value = {"params": {key: item for key, item in params.items() if item is not checked}}
    return encoding_problem(value, "field", MAX_DEPTH + _ENVELOPE_LEVELS)


def _problem(message: Any) -> str | None:
    kind = type(message)
    if kind is types.JSONRPCRequest or kind is types.JSONRPCNotification:
        return params_problem(message.params)
    if isinstance(message, types.JSONRPCResponse):
        value = {"result": message.result}
    elif isinstance(message, types.JSONRPCError):
        value = {"error": message.error.model_dump()}
    else:
        value = {"params": message.params} if message.params else None
    return encoding_problem(value, "field", MAX_DEPTH + _ENVELOPE_LEVELS) if value else None


def _params_sendable(params: Mapping[str, Any]) -> bool:
    """Whether a request's or notification's params can be sent, quickly: each value is checked but the
    arguments the call path checked (see mark_checked), and a plain ASCII string inline. On False the
    walk of the message names the place."""
    checked = _checked_arguments.get()
    for key, value in params.items():
        if type(key) is not str or not key.isascii():
            return False
        # The SDK's session sends a copy of them (its request model dumped): equal to what was checked,
        # compared in C, which is several times quicker than a walk (4 MB of `{}`: 0.03 s against 0.23).
        if key == "arguments" and (value is checked or (checked is not None and value == checked)):
            continue
        if type(value) is str and value.isascii():
            continue
        # A value of params sits two levels into the message the walk is given ({"params": {key: value}}).
        if encoding_problem(value, "field", MAX_DEPTH + _ENVELOPE_LEVELS - 2) is not None:
            return False
    return True
