"""The fast lane: a faster way into the one call path for a plain `tools/call` of a direct tool.

On the stdio front, most of what the gateway adds to a call is the server side of the SDK: a task
per request, middleware, request and result models built and dumped again (at 2026-07-28 also a
connection per request, built from its `_meta`). For the commonest message of all, a `tools/call` of
a namespaced tool on a running backend with nothing special asked for, none of that does anything, so
the front hands the raw line here: the lane parses it, makes the call through the same call path as
every other call (`Gateway.calls`), and writes back the JSON-RPC response itself, shaped as the SDK
server would shape it for the client's protocol era.

Everything else (other methods, progress tokens, a `traceparent` to continue, a 2026-07-28 log level
or retry with answers, unknown tools, surfaces other than `direct`, results that may be spilled or
cached, a backend not running yet) goes the normal way. The lane opens once the SDK server has settled
the connection's era: for a session-era client after `notifications/initialized`, for a 2026-07-28
client after its first request (its `server/discover`, usually), which the SDK server answers and locks
the connection to that era by. Cancellation of a fast call is handled here too, since the SDK server
never saw the request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types
import pydantic_core
from mcp_types import LOG_LEVEL_META_KEY, PROTOCOL_VERSION_META_KEY, methods
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from mcp_manifold._core.arguments import encoding_problem
from mcp_manifold._core.clients import Caller, Request, run_after_answer
from mcp_manifold._core.results import tool_error
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._core.wire import WireResult
from mcp_manifold._errors import BackendRequestError, ManifoldError
from mcp_manifold._front import stray_cancel
from mcp_manifold._front.request_meta import meta_accepted
from mcp_manifold._runtime.cancellation import stray_cancellation

if TYPE_CHECKING:
    from mcp_manifold._front.server import McpFront
    from mcp_manifold._runtime.gateway import Gateway

logger = logging.getLogger(__name__)

Send = Callable[[bytes], Awaitable[None]]


class FastRequest(Request):
    """A call taken by the lane: no progress token (the lane leaves those to the SDK server), and what
    the server initiates meanwhile goes to the stdio client through its session."""

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        await self.caller.log(level, data, logger_name)

    async def ask(self, method: str, params: Any) -> Any:
        return await self.caller.ask(method, params)


class FastLane:
    """Claims qualifying `tools/call` lines and answers them; tracks them for cancellation.

    `front` (the SDK server's wrapper) lets the lane answer 2026-07-28 clients as that server would;
    without it the lane serves session-era clients only.
    """

    def __init__(
        self, gateway: Gateway, send: Send, caller: Callable[[], Caller] | None = None, front: McpFront | None = None
    ) -> None:
        self.gateway = gateway
        self.send = send
        self._caller = caller or (lambda: Caller("fast-lane"))
        self._front = front
        self.open = False  # set once the SDK server has settled the connection's era
        self.era: str | None = None  # "session" or "stateless" (2026-07-28), from the client's opening
        self._in_flight: dict[Any, anyio.CancelScope] = {}

    def take(self, line: bytes, task_group: anyio.abc.TaskGroup) -> bool:
        """Handle `line` here if it qualifies (returns True); False leaves it to the SDK server."""
        if not self.open:
            self._watch_opening(line)
            return False
        if b'"tools/call"' in line:
            return self._take_call(line, task_group)
        if b'"notifications/cancelled"' in line:
            return self._take_cancel(line)
        return False

    def _watch_opening(self, line: bytes) -> None:
        """Follow the client's first messages, as the SDK server does, to learn the era it settles on."""
        if b'"notifications/initialized"' in line and self.era != "stateless":
            self.era, self.open = "session", True
            return
        if self.era is not None:
            return
        message = _decode(line)
        request_id = message.get("id") if message is not None else None
        if (
            message is None
            or message.get("jsonrpc") != "2.0"
            or not isinstance(request_id, int | str)
            or isinstance(request_id, bool)
            or not isinstance(message.get("method"), str)
        ):
            return  # not a request (as the SDK server reads one): it does not decide the era
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if message["method"] != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
            # This request opens a 2026-07-28 connection; the SDK server answers it, then calls may come here.
            self.era, self.open = "stateless", self._front is not None
        else:
            self.era = "session"  # open after its initialize, at notifications/initialized

    def _take_call(self, line: bytes, task_group: anyio.abc.TaskGroup) -> bool:
        message = _decode(line)
        params = plain_call(message)
        if params is None:
            return False
        version: str | None = None
        if self.era == "stateless":
            if self._front is None or not plain_modern_call(params):
                return False
            stateless = self._front.envelope_caller(params)
            if stateless is None:
                return False  # an envelope the SDK server refuses: it answers with the reason
            caller: Caller = stateless
            version = stateless.protocol_version
        else:
            meta = params.get("_meta")
            if meta is not None and PROTOCOL_VERSION_META_KEY in meta:
                return False  # a 2026-07-28 envelope on a session: the SDK server refuses it
            caller = self._caller()
            if not meta_accepted(session_version(caller), meta):
                return False
        route = self.gateway.fast_route(params["name"], caller)
        if route is None:
            return False
        assert message is not None
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | str) or encoding_problem(request_id):
            return False  # an id the SDK refuses, with the reason
        if request_id in self._in_flight:
            return False  # a duplicate id is the SDK's to refuse
        if version is not None:
            self.gateway.stateless_request(caller)  # counted, as the SDK server counts each one it serves
        scope = anyio.CancelScope()
        self._in_flight[request_id] = scope
        task_group.start_soon(self._answer, request_id, scope, route, params, caller, version)
        return True

    def _take_cancel(self, line: bytes) -> bool:
        message = _decode(line)
        params = message.get("params") if message else None
        if not isinstance(params, dict):
            return False
        scope = self._in_flight.get(params.get("requestId"))
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _answer(
        self,
        request_id: Any,
        scope: anyio.CancelScope,
        target: Target,
        params: dict[str, Any],
        caller: Caller,
        version: str | None,
    ) -> None:
        request = FastRequest(caller, params.get("_meta") if version is not None else None)
        request.after_answer = []  # the call's records are made after the answer is on its way
        answering = False
        try:
            with scope:
                _, frame = await call_response(
                    self.gateway, self._front, request, request_id, target, params, version, encode=_frame
                )
                answering = True
                await self.send(frame)
        except BaseException as exc:
            if not stray_cancellation(exc):
                raise
            stray_cancel.log_stray(f"fast lane: tools/call {target.exposed}")
            if not answering:  # one answer per request: the one already on its way stands
                await self.send(_frame({"jsonrpc": "2.0", "id": request_id, "error": _FAILED_IN_GATEWAY}))
        finally:
            self._in_flight.pop(request_id, None)
            run_after_answer(request.after_answer)  # also when cancelled: a call is never left unrecorded
        # A cancelled request gets no response, as the protocol says.


# --- what the stdio lane and the HTTP lane (`_front/http_lane.py`) share --------------------------------


def plain_call(message: Any) -> dict[str, Any] | None:
    """The params of `message` when it is a `tools/call` request with nothing special asked for (a name,
    arguments and `_meta` only; no progress token, not even a null one, no trace to continue), else None:
    the SDK server's to answer."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None
    if message.get("jsonrpc") != "2.0" or not _PLAIN_KEYS.issuperset(message):
        return None  # the SDK's to refuse, saying why
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("name"), str) or not _PLAIN_PARAMS.issuperset(params):
        return None  # a task, a retry's state or answers, anything else: the SDK server's to check and do
    arguments = params.get("arguments")
    meta = params.get("_meta")
    if arguments is not None and not isinstance(arguments, dict):
        return None
    if meta is not None and (not isinstance(meta, dict) or "progressToken" in meta or "traceparent" in meta):
        return None  # progress, and a trace to continue, are the SDK server's to carry on
    return params


_PLAIN_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})


def session_version(caller: Caller) -> str:
    """The protocol version a session-era caller's session settled on (the latest the SDK speaks before
    its handshake is known)."""
    connection = getattr(caller, "connection", None)
    return getattr(connection, "protocol_version", None) or LATEST_HANDSHAKE_VERSION


def plain_modern_call(params: dict[str, Any]) -> bool:
    """Whether a 2026-07-28 `tools/call` (its `_meta` envelope aside) asks for nothing the SDK server must do."""
    meta = params.get("_meta")
    return (
        isinstance(meta, dict)
        and LOG_LEVEL_META_KEY not in meta  # log messages tied to the request are the SDK server's to send
        and params.get("requestState") is None  # a retry: its state is unsealed by the SDK server
        and params.get("inputResponses") is None
    )


async def call_response(
    gateway: Gateway,
    front: McpFront | None,
    request: Request,
    request_id: Any,
    target: Target,
    params: dict[str, Any],
    version: str | None,
    session_version: str | None = None,
    *,
    encode: Callable[[dict[str, Any]], bytes],
) -> tuple[dict[str, Any], bytes]:
    """The JSON-RPC response to a lane's `tools/call`, made through the one call path and shaped as the
    SDK server would shape it for the client's era (`version`: 2026-07-28, or None for a session; see
    `shaped_result` for `session_version`), and its bytes as `encode` writes them for the lane's wire.

    `encode` must refuse (ValueError) what is no JSON: a server's NaN or Infinity becomes a tool error
    naming the server, never a frame that ends a strict client's stream."""
    response: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    try:
        try:
            result = await gateway.calls.call_tool(request, ToolCall(target, params.get("arguments"), wire=True))
        except BackendRequestError as exc:  # the server's error that asks the client to act, with its data
            error = {"code": exc.code, "message": f"tools/call failed: {exc}"}
            response["error"] = error if exc.data is None else {**error, "data": exc.data}
            return response, encode(response)
        except ManifoldError as exc:
            result = tool_error(str(exc))
        response["result"] = await shaped_result(front, params, version, result, session_version)
        try:
            return response, encode(response)
        except ValueError:  # NaN or Infinity from the server
            unsent = tool_error(f"server {target.server!r}: {_NOT_JSON}")
            response["result"] = await shaped_result(front, params, version, unsent, session_version)
            return response, encode(response)
    except Exception:  # never leave the client waiting on an answer, nor tell it our internals
        logger.exception("fast lane: tools/call %s failed", target.exposed)
        response.pop("result", None)
        response["error"] = _FAILED_IN_GATEWAY
        return response, encode(response)


async def shaped_result(
    front: McpFront | None, params: dict[str, Any], version: str | None, result: Any, session_version: str | None = None
) -> Any:
    """The result as the SDK server would send it: at the 2026-07-28 `version`, or to a session. Given the
    session's negotiated `session_version`, a model result also goes through that version's field sieve,
    as the SDK server sends it (the same fields, in the same order: byte for byte its answer)."""
    if version is not None:
        assert front is not None
        return await front.modern_result(params, version, result)
    if isinstance(result, WireResult):
        return result.wire  # as the server sent it, without 2026-07-28's resultType
    # `resultType` is a 2026-07-28 field, which the SDK server's per-version sieve drops for a
    # session-era client (it is the only one a tool result has).
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})
    return methods.serialize_server_result("tools/call", session_version, dumped) if session_version else dumped


def _decode(line: bytes) -> dict[str, Any] | None:
    """The line's message, read by the parser the SDK's stdio reader uses, so a line it cannot read (nested
    too deep, a lone surrogate) is never taken here but answered as the SDK's path answers it."""
    try:
        message = pydantic_core.from_json(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


# What a call that failed in the gateway itself is answered (never its internals); sent as it is, never changed.
_FAILED_IN_GATEWAY = {"code": types.INTERNAL_ERROR, "message": "tools/call failed in the gateway"}
_NOT_JSON = "its answer holds a number JSON cannot carry (NaN or Infinity), so it was not passed on"


def _frame(message: dict[str, Any]) -> bytes:
    # allow_nan=False: Python would write NaN and Infinity, which are no JSON and end a strict client's stream.
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + b"\n"
