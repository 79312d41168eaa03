"""The HTTP fast lane: a plain `tools/call` POSTed to /mcp, answered without the SDK's HTTP machinery.

Over streamable HTTP each call pays the SDK's server side: Starlette routing, the session manager, a
task group per request, SSE framing of the answer, request and result models built and dumped again.
For a `tools/call` of a direct tool on a running backend with nothing special asked for, none of that
does anything. So this ASGI layer sits behind `guard` (authentication and the request's `Identity` are
done) and in front of the SDK's app: it reads the raw request, parses the body once, makes the call
through the same call path as every other call (`_front/fast_lane.py`'s `call_response`, shared with
the stdio lane) and answers `application/json` itself, byte for byte the JSON-RPC message the SDK
server would have sent for the client's era.

While a call runs, the lane does what the SDK's path does (`_front/lane_reply.py`: logs streamed as they
come, pings past the SDK's 15 s window, a 2026-07-28 client's hanging up cancelling its call), and a
session-era client's `notifications/cancelled` for a lane call stops it and answers it `Request
cancelled`.

Taken: a POST to exactly /mcp that passes the SDK's DNS-rebinding check (Host and Origin, on a loopback
address), both JSON and SSE accepted (what the SDK asks of a client), a JSON body
within the SDK's size limit that is one `tools/call` request (`plain_call`), and

- at 2026-07-28 (an `MCP-Protocol-Version` header of that era): an envelope and headers the SDK's
  ladder and its params checks accept (`McpFront.envelope_caller`), no log level, no retry, no
  `Mcp-Param-*` header and no header-mirrored argument in the tool's schema; the caller is the
  request's principal, as in server.py;
- in the session era: the `Mcp-Session-Id` of a session that is open and was opened by this request's
  credential (checked with the SDK's session manager), whose client has finished its `initialize` and
  declared nothing a server may ask it mid-call (sampling, elicitation, roots: those go on the request's
  own SSE stream, which only the SDK path has); the caller is that session's `SessionCaller`.

Anything else (other methods, progress tokens, unknown tools and names the caller may not see, GET
streams, DELETE, unknown sessions, a profile other than the session's) goes to the SDK path, which
answers it as before. `MANIFOLD_HTTP_LANE=0` in the environment turns the lane off (the equivalence test
and the benchmark compare the two paths with it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, REQUEST_CANCELLED
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    find_duplicated_routing_header,
)
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request as StarletteRequest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._config.switches import speed_up_on
from mcp_manifold._core.bounded import BoundedTable
from mcp_manifold._core.clients import Caller, Request, asks_of, at_least, run_after_answer
from mcp_manifold._core.router import Target
from mcp_manifold._front import lane_reply
from mcp_manifold._front.fast_lane import (
    FastRequest,
    call_response,
    plain_call,
    plain_modern_call,
    session_version,
)
from mcp_manifold._front.identity import SCOPE_KEY, Identity
from mcp_manifold._front.lane_reply import Reply, event
from mcp_manifold._front.large_requests import read_body
from mcp_manifold._front.request_meta import meta_accepted
from mcp_manifold._front.server import _CALLER, McpFront, SessionCaller, StatelessCaller, principal_of_request
from mcp_manifold._sdk import connection_of, open_session_transport, session_request_in_flight

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
ENABLE_ENV = "MANIFOLD_HTTP_LANE"  # "0" turns the lane off
_HANDSHAKE = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower().encode()
_ROUTING = frozenset(name.encode() for name in (MCP_PROTOCOL_VERSION_HEADER, MCP_METHOD_HEADER, MCP_NAME_HEADER))
_VERDICTS_KEPT = 64  # verdicts kept on the headers a client repeats (Accept; Content-Type, Host and Origin)
_CANCELLED = b'"notifications/cancelled"'
_CANCELLED_ERROR = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}  # the SDK's answer to such a call
_SCHEMAS_KEPT = 4096  # tool versions whose header mirroring is kept (servers that change their tools add more)

# The ASGI scope of the HTTP request being served, for what the SDK asks without naming the request.
_current_scope: ContextVar[Scope | None] = ContextVar("manifold_http_scope", default=None)


def lane_enabled() -> bool:
    return speed_up_on(ENABLE_ENV)


class LaneCounts:
    """`tools/call` requests over HTTP by the way they were answered: the lane, or the SDK's path."""

    def __init__(self) -> None:
        self.lane = 0
        self.sdk = 0

    def snapshot(self) -> dict[str, int]:
        return {"lane": self.lane, "sdk": self.sdk}


class HttpLane:
    """The ASGI layer in front of the SDK's streamable HTTP app (`app`) that takes plain calls."""

    def __init__(
        self, front: McpFront, app: ASGIApp, session_manager: Any, counts: LaneCounts, enabled: bool = True
    ) -> None:
        self.front = front
        self.gateway = front.gateway
        self.app = app
        self.session_manager = session_manager
        self.max_body = session_manager.max_request_body_size
        self.counts = counts
        # The SDK's DNS-rebinding check (Host, Origin) of every request it serves, for the lane's too.
        self.security = TransportSecurityMiddleware(session_manager.security_settings)
        self._security_verdicts: BoundedTable[tuple[bytes | None, ...], bool] = BoundedTable(_VERDICTS_KEPT)
        self.enabled = enabled  # off, it only counts the calls the SDK's path answers
        # Each open session's caller, by session id, as the SDK server's requests reveal it.
        self._sessions: weakref.WeakValueDictionary[str, SessionCaller] = weakref.WeakValueDictionary()
        # By tool hash: does its schema mirror arguments into headers?
        self._mirrored: BoundedTable[str, bool] = BoundedTable(_SCHEMAS_KEPT)
        # The session-era calls running on the lane, by (session id, request id), for their client's cancel
        # and their session's end (a client may send one id twice at once: each such call is kept).
        self._in_flight: dict[tuple[bytes, Any], list[tuple[Reply, Caller]]] = {}
        front.server.middleware.append(self._remember_session)
        # Without it the SDK's server lists every tool (a whole tools/list through its dispatch) to check
        # a 2026-07-28 call's `Mcp-Param-*` headers, for every call with arguments on its path.
        front.server.get_tool_input_schema = self.listed_input_schema

    async def _remember_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            self.counts.sdk += 1
        try:
            return await call_next(ctx)
        finally:
            connection = connection_of(ctx)
            caller = connection.state.get(_CALLER)
            if connection.session_id and isinstance(caller, SessionCaller):
                self._sessions[connection.session_id] = caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _current_scope.set(scope)
        try:
            await self._serve(scope, receive, send)
        finally:
            _current_scope.reset(token)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled or scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != MCP_PATH:
            ends_session = scope["type"] == "http" and scope["method"] == "DELETE" and scope["path"] == MCP_PATH
            if self._in_flight and ends_session:
                await self._delete(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        headers = _Headers(scope["headers"])
        length = headers.get(b"content-length")
        too_long = length is not None and (not length.isdigit() or int(length) > self.max_body)
        if (
            too_long
            or length is None
            or not _accepts_json_and_sse(headers.get(b"accept"))
            or headers.get(b"content-type", b"").split(b";")[0].strip() != b"application/json"
            or not isinstance(scope.get(SCOPE_KEY), Identity)
        ):
            if self._in_flight and not too_long and headers.get(MCP_SESSION_ID_HEADER.encode()) is not None:
                # No call for the lane, but maybe a cancel of one in a form the SDK accepts (a chunked body).
                body, complete, replay = await read_body(receive, self.max_body)
                await self._sdk_answers(scope, headers, body if complete else b"", replay, send)
                return
            await self.app(scope, receive, send)
            return
        if not await self._passes_security(scope, headers):
            await self.app(scope, receive, send)  # which refuses it, saying why
            return
        body, complete, replay = await read_body(receive, self.max_body)
        if not complete:  # its client went before the whole body came: never a call to make (nor a cancel)
            await self.app(scope, replay, send)
            return
        try:
            call = self._qualify(scope, headers, body)
        except Exception:  # a request the lane misreads is still answered, by the SDK
            logger.exception("HTTP fast lane: could not read a request; the SDK's path answers it")
            call = None
        if call is None:
            await self._sdk_answers(scope, headers, body, replay, send)
            return
        await self._answer(call, receive, send, headers.get(MCP_SESSION_ID_HEADER.encode()))

    async def _sdk_answers(self, scope: Scope, headers: _Headers, body: bytes, replay: Receive, send: Send) -> None:
        """A request the SDK answers, its `body` read already. When the SDK accepts it as a session's
        `notifications/cancelled` (202) of a call the lane runs, that call stops, as the SDK's own would."""
        if not (self._in_flight and _CANCELLED in body):
            await self.app(scope, replay, send)
            return
        if await _status_of(self.app, scope, replay, send) == 202:
            try:
                self._cancel(scope, headers, body)
            except Exception:  # a cancel the lane misreads stops nothing; the SDK has answered it
                logger.exception("HTTP fast lane: could not read a cancel")

    def _cancel(self, scope: Scope, headers: _Headers, body: bytes) -> None:
        """A session-era client's `notifications/cancelled` for a call the lane is running: the call stops
        and is answered `Request cancelled`, as on the SDK's path (which never saw the call)."""
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):  # not for the lane: the SDK answers it
            return
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled" or "id" in message:
            return
        request_id = params.get("requestId") if isinstance(params, dict) else None
        session_id = headers.get(MCP_SESSION_ID_HEADER.encode())
        if session_id is None or type(request_id) not in (int, str):  # not 1.0 or True for the call 1
            return
        running = self._in_flight.get((session_id, request_id))
        identity = scope.get(SCOPE_KEY)
        if running is None or not isinstance(identity, Identity):
            return
        caller = running[0][1]  # one session's calls: one caller
        if self._session_transport(scope, identity, caller, session_id.decode("latin-1")) is not None:
            for reply, _ in running:
                reply.cancel("client")  # by its own client only

    async def _delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A DELETE, answered by the SDK. When it ends a session, the lane's calls on that session end
        too, unanswered, as the SDK's path ends the calls it runs for it."""
        status = await _status_of(self.app, scope, receive, send)
        session_id = _Headers(scope["headers"]).get(MCP_SESSION_ID_HEADER.encode())
        if 200 <= status < 300 and session_id is not None:
            for (owner, _), running in list(self._in_flight.items()):
                if owner == session_id:
                    for reply, _ in running:
                        reply.cancel("session ended")

    async def _passes_security(self, scope: Scope, headers: _Headers) -> bool:
        """The SDK's DNS-rebinding check of this request. mcp 2.3.0's reads only the Content-Type, Host and
        Origin headers (the first of each) against fixed settings, so its verdict is kept per such three: a
        client sends the same ones with every call. (Many different ones empty the table: it stays small
        whatever clients send.)"""
        key = (headers.get(b"content-type"), headers.get(b"host"), headers.get(b"origin"))
        passes = self._security_verdicts.get(key)
        if passes is None:
            passes = await self.security.validate_request(StarletteRequest(scope), is_post=True) is None
            self._security_verdicts.keep(key, passes)
        return passes

    def _qualify(self, scope: Scope, headers: _Headers, body: bytes) -> _LaneCall | None:
        """The call to make when the request qualifies; None leaves it (its body unread by anyone else) to
        the SDK."""
        version_header = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode())
        modern = version_header is not None and version_header.decode("latin-1") not in _HANDSHAKE
        try:
            # The parser each SDK path uses, so both read the same message.
            # (`json.loads` of bytes first guesses their encoding; a body that is not UTF-8 is left to the SDK.)
            message = json.loads(body.decode()) if modern else pydantic_core.from_json(body)
        except (ValueError, RecursionError):
            return None
        params = plain_call(message)
        if params is None:
            return None
        request_id = message["id"]
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            return None
        identity: Identity = scope[SCOPE_KEY]
        transport = None
        if modern:
            caller = self._modern_caller(headers, params, identity)
        else:
            caller, transport = self._session_caller(scope, headers, params, identity)
        if caller is None:
            return None
        target = self.gateway.fast_route(params["name"], caller)
        if target is None or (modern and self._header_mirrored(caller, params)):
            return None
        return _LaneCall(caller, target, request_id, params, modern, transport)

    async def _answer(self, call: _LaneCall, receive: Receive, send: Send, session_id: bytes | None) -> None:
        caller = call.caller
        version: str | None = None
        session: str | None = None
        if call.modern:
            version = caller.protocol_version  # type: ignore[attr-defined]
            self.gateway.stateless_request(caller)  # counted, as the SDK server counts each one it serves
        else:
            connection = caller.connection  # type: ignore[attr-defined]
            session = connection.protocol_version if connection is not None else None
            self.gateway.back_channel.track(caller)
        self.counts.lane += 1
        reply = Reply(send, call.modern, session_id)
        request = FastRequest(caller, call.params.get("_meta")) if call.modern else _SessionLaneRequest(caller, reply)
        request.after_answer = []  # the call's records are made after the answer is on its way
        key = (session_id, call.request_id) if session_id is not None and not call.modern else None
        running = (reply, caller)
        if key is not None:
            self._in_flight.setdefault(key, []).append(running)
        minding = asyncio.get_running_loop().call_later(lane_reply.MIND_AFTER, self._start_minding, reply, receive)
        answer: tuple[dict[str, Any], bytes] | None = None
        try:
            with session_request_in_flight(call.transport), reply.call:
                answer = await call_response(
                    self.gateway,
                    self.front,
                    request,
                    call.request_id,
                    call.target,
                    call.params,
                    version,
                    session,
                    encode=_modern_json if call.modern else _session_json,
                )
            # Out of the call's scope: a cancel that comes once the call has its answer is too late to
            # cut that answer short.
            if answer is not None:
                await reply.finish(*answer)
            elif reply.cancelled_for == "client":
                cancelled = {"jsonrpc": "2.0", "id": call.request_id, "error": _CANCELLED_ERROR}
                await reply.finish(cancelled, _session_json(cancelled))
            elif reply.cancelled_for == "session ended":
                await reply.end_unanswered()
            # else its client hung up: there is nobody to answer
        finally:
            minding.cancel()
            if reply.minder is not None:  # only then: anyio's cancel formats the task's repr, a cost per call
                reply.minder.cancel()
            if key is not None:
                kept = self._in_flight[key]
                kept.remove(running)
                if not kept:
                    del self._in_flight[key]
            run_after_answer(request.after_answer)

    def _start_minding(self, reply: Reply, receive: Receive) -> None:
        if reply.finished:
            return
        reply.minder = anyio.CancelScope()
        try:
            self.gateway.task_group.start_soon(reply.mind, receive, reply.minder)
        except RuntimeError:  # the gateway is closing: its calls are ending anyway
            logger.debug("HTTP fast lane: a call outlasted the gateway's task group")

    def listed_input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The `inputSchema` of tool `name` as the current HTTP request's 2026-07-28 caller is shown it in
        `tools/list` (the SDK server's `get_tool_input_schema`), from what the gateway holds now; None
        when it lists no such tool (the SDK then checks no header, as when its listing lacks the tool)."""
        scope = _current_scope.get()
        if scope is None:
            return None
        identity = scope.get(SCOPE_KEY)
        principal = identity.principal if isinstance(identity, Identity) else principal_of_request()
        # The caller the SDK path makes of such a request (`McpFront._caller`); its envelope plays no part.
        caller = StatelessCaller(_NO_ENVELOPE, principal)  # type: ignore[arg-type]
        if isinstance(identity, Identity):
            caller.principal, caller.profile = identity.principal, identity.profile
        request = Request(caller)
        request.endpoint = dict(scope.get("path_params") or {})
        gateway = self.gateway
        for surface in gateway.surfaces:
            if gateway.access.allows_surface(request, surface.name):
                for tool in surface.list_tools(request):
                    if tool.name == name:
                        return tool.input_schema
        return None

    def _modern_caller(self, headers: _Headers, params: dict[str, Any], identity: Identity) -> Caller | None:
        if not plain_modern_call(params) or headers.any_prefixed(_PARAM_PREFIX):
            return None
        pairs = headers.routing()  # all the SDK's ladder reads of the headers (mcp 2.3.0)
        if find_duplicated_routing_header(pairs) is not None:
            return None
        caller = self.front.envelope_caller(params, identity.principal, dict(pairs))
        if caller is None:
            return None
        caller.principal, caller.profile = identity.principal, identity.profile
        return caller

    def _session_caller(
        self, scope: Scope, headers: _Headers, params: dict[str, Any], identity: Identity
    ) -> tuple[Caller | None, Any]:
        meta = params.get("_meta")
        if meta is not None and PROTOCOL_VERSION_META_KEY in meta:
            return None, None  # a 2026-07-28 envelope on a session: the SDK server refuses it
        session_id = headers.get(MCP_SESSION_ID_HEADER.encode())
        if session_id is None:
            return None, None
        key = session_id.decode("latin-1")
        caller = self._sessions.get(key)
        if caller is None or not caller.arrived or asks_of(caller.capabilities):
            return None, None
        if not meta_accepted(session_version(caller), meta):
            return None, None  # the SDK server refuses it, saying why
        transport = self._session_transport(scope, identity, caller, key)
        if transport is None:
            return None, None
        return caller, transport

    def _session_transport(self, scope: Scope, identity: Identity, caller: Caller, session_id: str) -> Any:
        """The SDK transport of session `session_id` (`caller`'s) when this request may use it: the same
        principal and profile as the session's, and the credential that opened it (the session manager's
        own check); None when the session has ended or is another's, which the SDK path refuses."""
        if (identity.principal, identity.profile) != (caller.principal, caller.profile):
            return None
        return open_session_transport(self.session_manager, session_id, scope.get("user"))

    def _header_mirrored(self, caller: Caller, params: dict[str, Any]) -> bool:
        """Whether the tool's schema mirrors arguments into `Mcp-Param-*` headers, which the SDK's path
        checks against the arguments (with the tool's listing): such calls are left to it."""
        if not params.get("arguments"):
            return False
        entry = self.gateway.view(Request(caller)).entry(params["name"])
        if entry is None:
            return True
        mirrored = self._mirrored.get(entry.hash)
        if mirrored is None:
            mirrored = "x-mcp-header" in json.dumps(entry.exposed.input_schema)
            self._mirrored.keep(entry.hash, mirrored)  # a server that keeps changing its tools adds entries
        return mirrored


_NO_ENVELOPE = SimpleNamespace(client_capabilities=None, protocol_version=None)


class _SessionLaneRequest(FastRequest):
    """A session-era call on the lane. A log message the server sends while it runs goes on the response's
    own event stream, ahead of the answer, as the SDK's path sends it; through the session it would take
    the session's GET stream and could reach the client after the answer, or not at all."""

    def __init__(self, caller: Caller, reply: Reply) -> None:
        super().__init__(caller, None)
        self.reply = reply

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        if not at_least(level, self.caller.log_level):
            return
        params: dict[str, Any] = {"level": level}
        if logger_name is not None:
            params["logger"] = logger_name
        params["data"] = data
        try:
            message = _session_json({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        except ValueError:  # what no JSON carries (a lone surrogate): dropped, as the SDK's writer cannot send it
            logger.debug("HTTP fast lane: a log message could not be encoded; dropped")
            return
        await self.reply.stream(event(message))


@dataclass(frozen=True)
class _LaneCall:
    caller: Caller
    target: Target
    request_id: Any
    params: dict[str, Any]
    modern: bool
    transport: Any  # a session's SDK transport, held open while the call runs


class _Headers:
    """The raw ASGI headers, looked up by lower-case name (ASGI gives them lower-cased)."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def get(self, name: bytes, default: bytes | None = None) -> bytes | None:
        for key, value in self.raw:
            if key == name:
                return value
        return default

    def any_prefixed(self, prefix: bytes) -> bool:
        return any(key.startswith(prefix) for key, _ in self.raw)

    def routing(self) -> list[tuple[str, str]]:
        """The routing headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), decoded, each time given."""
        return [(key.decode("latin-1"), value.decode("latin-1")) for key, value in self.raw if key in _ROUTING]


def _accepts_json_and_sse(accept: bytes | None) -> bool:
    """What the SDK's transport asks of a POST's `Accept` (`check_accept_headers`): JSON and SSE both. (A
    client sends the same `Accept` with every request: the answers for a few are kept.)"""
    return accept is not None and _accepts(accept)


@lru_cache(maxsize=_VERDICTS_KEPT)
def _accepts(accept: bytes) -> bool:
    types = {part.split(b";")[0].strip().lower() for part in accept.split(b",")}
    if b"*/*" in types:
        return True
    return bool(types & {b"application/json", b"application/*"}) and bool(types & {b"text/event-stream", b"text/*"})


async def _status_of(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int:
    """`app` answers the request; the HTTP status it answered with (0: none)."""
    status = 0

    async def watched(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watched)
    return status


def _modern_json(response: dict[str, Any]) -> bytes:
    # The SDK's 2026-07-28 `_write`, but refusing NaN and Infinity, which are no JSON (see `call_response`).
    return json.dumps(response, separators=(",", ":"), allow_nan=False).encode()


def _session_json(response: dict[str, Any]) -> bytes:
    # The SDK's session transport (`model_dump_json`), which writes a NaN or Infinity as null.
    return pydantic_core.to_json(response, inf_nan_mode="null")
