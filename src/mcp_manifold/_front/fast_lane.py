"""The fast lane: a faster way into the one call path for a plain `tools/call` of a direct tool.

On the stdio front, most of what the gateway adds to a call is the server side of the SDK: a task
per request, middleware, request and result models built and dumped again. For the commonest
message of all, a `tools/call` of a namespaced tool on a running backend with nothing special
asked for, none of that does anything, so the front hands the raw line here: the lane parses it,
makes the call through the same call path as every other call (`Gateway.calls`), and writes back
the JSON-RPC response itself.

Everything else (other methods, progress tokens, a `traceparent` to continue, unknown tools, surfaces
other than `direct`, results that may be spilled or cached, a backend not running yet) goes the
normal way (the SDK server carries a client's trace on to the backend), and so does
every call until the client has sent `notifications/initialized` (only protocol versions before
2026-07-28 do; later ones keep the normal path throughout). Cancellation of a fast call is handled
here too, since the SDK server never saw the request.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types

from mcp_manifold._core.clients import Caller, Request
from mcp_manifold._core.results import tool_error
from mcp_manifold._core.router import Target, ToolCall
from mcp_manifold._errors import ManifoldError

if TYPE_CHECKING:
    from mcp_manifold._runtime.gateway import Gateway

Send = Callable[[bytes], Awaitable[None]]


class FastRequest(Request):
    """A call taken by the lane: no progress token (the lane leaves those to the SDK server), and what
    the server initiates meanwhile goes to the stdio client through its session."""

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        await self.caller.log(level, data, logger_name)

    async def ask(self, method: str, params: Any) -> Any:
        return await self.caller.ask(method, params)


class FastLane:
    """Claims qualifying `tools/call` lines and answers them; tracks them for cancellation."""

    def __init__(self, gateway: Gateway, send: Send, caller: Callable[[], Caller] | None = None) -> None:
        self.gateway = gateway
        self.send = send
        self._caller = caller or (lambda: Caller("fast-lane"))
        self.open = False  # set once the client has completed a legacy initialize
        self._in_flight: dict[Any, anyio.CancelScope] = {}

    def take(self, line: bytes, task_group: anyio.abc.TaskGroup) -> bool:
        """Handle `line` here if it qualifies (returns True); False leaves it to the SDK server."""
        if not self.open:
            if b'"notifications/initialized"' in line:
                self.open = True
            return False
        if b'"tools/call"' in line:
            return self._take_call(line, task_group)
        if b'"notifications/cancelled"' in line:
            return self._take_cancel(line)
        return False

    def _take_call(self, line: bytes, task_group: anyio.abc.TaskGroup) -> bool:
        message = _decode(line)
        if message is None or message.get("method") != "tools/call" or "id" not in message:
            return False
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return False
        arguments = params.get("arguments")
        meta = params.get("_meta")
        if arguments is not None and not isinstance(arguments, dict):
            return False
        if meta is not None and (
            not isinstance(meta, dict) or meta.get("progressToken") is not None or "traceparent" in meta
        ):
            return False  # progress, and a trace to continue, are the SDK server's to carry on
        route = self.gateway.fast_route(params["name"], self._caller())
        if route is None:
            return False
        request_id = message["id"]
        if request_id in self._in_flight:
            return False  # a duplicate id is the SDK's to refuse
        scope = anyio.CancelScope()
        self._in_flight[request_id] = scope
        task_group.start_soon(self._answer, request_id, scope, route, arguments)
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

    async def _answer(self, request_id: Any, scope: anyio.CancelScope, target: Target, arguments: Any) -> None:
        try:
            with scope:
                response: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
                try:
                    result = await self.gateway.calls.call_tool(
                        FastRequest(self._caller()), ToolCall(target, arguments)
                    )
                except ManifoldError as exc:
                    result = tool_error(str(exc))
                except Exception as exc:  # never leave the client waiting on an answer
                    response["error"] = {"code": types.INTERNAL_ERROR, "message": f"tools/call failed: {exc}"}
                if "error" not in response:
                    # The lane serves session-era clients only: `resultType` is a 2026-07-28 field, which the
                    # SDK server's per-version sieve would drop (it is the only one a tool result has).
                    response["result"] = result.model_dump(
                        by_alias=True, mode="json", exclude_none=True, exclude={"result_type"}
                    )
                await self.send(_frame(response))
        finally:
            self._in_flight.pop(request_id, None)
        # A cancelled request gets no response, as the protocol says.


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _frame(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
