"""The MCP server clients talk to: the SDK's lowlevel `Server`, its handlers asking the gateway.

Each handler turns the SDK's request context into a `Request` of a `Caller` (core/clients.py), asks the
gateway (which asks the surfaces), and turns the gateway's errors into MCP errors at this one place: a
bad request or an unknown name is INVALID_PARAMS with a message naming what was wrong, a server's own
MCP error keeps its code, anything else of ours is INTERNAL_ERROR with our message. Tool calls answer
failures as tool errors (the gateway does that), never as protocol errors.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.message import ServerMessageMetadata
from mcp_types import SERVER_INFO_META_KEY, methods
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from mcp_manifold._core.bounded import BoundedTable
from mcp_manifold._core.clients import Caller, ListKind, Request, at_least, merged_extensions, undeclared
from mcp_manifold._core.wire import WireResult
from mcp_manifold._errors import BackendRequestError, InvalidRequest, ManifoldError, NotFound
from mcp_manifold._front.identity import request_identity
from mcp_manifold._front.listen import GatewayListenHandler
from mcp_manifold._front.request_meta import meta_accepted
from mcp_manifold._front.stray_cancel import refusing_stray_cancellations
from mcp_manifold._front.unasked import UnaskedSends
from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._sdk import connection_of, no_deprecation_warnings, sealed
from mcp_manifold._version import __version__

logger = logging.getLogger(__name__)
T = TypeVar("T")

_CALLER = "manifold.caller"  # where a connection keeps its SessionCaller
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tasks/result")


class _TaskParams(types.RequestParams):
    task_id: str | None = None


_SERVER_REQUESTS: dict[str, tuple[Any, Any]] = {
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


def _server_request(method: str, params: Any) -> tuple[Any, Any]:
    request_type, result_type = _SERVER_REQUESTS[method]
    return (request_type(params=params) if params is not None else request_type()), result_type


class SessionCaller(Caller):
    """A session-era client: one SDK `Connection` (the stdio client, or one HTTP session)."""

    identified = True

    def __init__(self, connection: Connection) -> None:
        super().__init__()
        self._connection = weakref.ref(connection)
        self.arrived = False  # the gateway was told about it (once its capabilities are known)
        self.state = connection.state  # lives as long as the session
        connection.exit_stack.callback(self.close)  # hang-up, DELETE or idle expiry
        self._unasked = UnaskedSends()  # what it is sent unasked, bounded (`unasked.py`)

    @property
    def connection(self) -> Connection | None:
        return self._connection()

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        connection = self._connection()
        return connection.client_capabilities if connection is not None else None

    async def notify_list_changed(self, kinds: set[ListKind]) -> None:
        async def send(connection: Connection) -> None:
            if "tools" in kinds:
                await connection.send_tool_list_changed()
            if "resources" in kinds:
                await connection.send_resource_list_changed()
            if "prompts" in kinds:
                await connection.send_prompt_list_changed()

        await self._send_unasked(send)

    async def send_resource_updated(self, uri: str) -> None:
        await self._send_unasked(lambda connection: connection.send_resource_updated(uri))

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        if not at_least(level, self.log_level):
            return

        async def send(connection: Connection) -> None:
            with no_deprecation_warnings():
                await connection.log(level, data, logger=logger_name)

        await self._send_unasked(send)

    async def _send_unasked(self, send: Callable[[Connection], Awaitable[None]]) -> None:
        """Send the client what it did not ask for, within its bound (`unasked.py`); nothing once it has gone."""
        connection = self._connection()
        if connection is None:
            return

        async def quietly() -> None:
            with _quiet():
                await send(connection)

        await self._unasked.send(quietly, self.principal or self.key)

    async def ask(self, method: str, params: Any) -> Any:
        connection = self._connection()
        if connection is None:
            return await super().ask(method, params)
        refusal = undeclared(connection.client_capabilities, method)
        if refusal is not None:
            return refusal
        request, _ = _server_request(method, params)
        return await connection.send_request(request)


class _Envelope(NamedTuple):
    """What a `StatelessCaller` reads of a request's connection, for one read from its `_meta` envelope."""

    protocol_version: str
    client_capabilities: types.ClientCapabilities | None


_UNSEEN = object()
_CAPABILITY_FORMS = 256  # typed forms of clients' capabilities kept (see `McpFront._capabilities`)
_CAPABILITY_FORM_CHARS = 4096  # a longer form is typed each time, not kept


class StatelessCaller(Caller):
    """A 2026-07-28 client: no session, so one of these per request.

    Only an authenticated principal identifies such a client across requests; an anonymous one is a
    stranger every time, and nothing it does changes what the next request sees (SEP-2567). Changes
    reach it on its `subscriptions/listen` stream; questions, as `input_required` results.
    """

    era = "stateless"

    def __init__(self, connection: Connection | _Envelope, principal: str | None) -> None:
        super().__init__(f"principal:{principal}" if principal else None)
        self.identified = principal is not None
        self._capabilities = connection.client_capabilities
        self.protocol_version = connection.protocol_version

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        return self._capabilities

    async def ask(self, method: str, params: Any) -> Any:
        return _no_questions_mid_call(method)


def _no_questions_mid_call(method: str) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"{method}: a 2026-07-28 client is asked only through input_required, never in the middle of a call",
    )


class SdkRequest(Request):
    """One request the SDK server received; progress, logs and questions go back on its own stream."""

    def __init__(self, caller: Caller, ctx: ServerRequestContext[Any, Any], meta: Any = None) -> None:
        super().__init__(caller, ctx.meta if meta is None else meta)
        self.ctx = ctx

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        with _quiet():
            await self.ctx.session.report_progress(progress, total, message)

    async def log(self, level: types.LoggingLevel, data: Any, logger_name: str | None = None) -> None:
        if not at_least(level, self.caller.log_level):  # a 2026-07-28 request's own level: the SDK's to apply
            return
        with _quiet(), no_deprecation_warnings():
            await self.ctx.session.send_log_message(
                level, data, logger=logger_name, related_request_id=self.ctx.request_id
            )

    async def ask(self, method: str, params: Any) -> Any:
        refusal = undeclared(self.caller.capabilities, method)
        if refusal is not None:
            return refusal
        if self.caller.era == "stateless":
            return _no_questions_mid_call(method)
        request, result_type = _server_request(method, params)
        return await self.ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id)
        )

    def without_progress(self) -> Request:
        meta = self.meta
        if not meta or ("progress_token" not in meta and "progressToken" not in meta):
            return self
        stripped = {key: value for key, value in meta.items() if key not in ("progress_token", "progressToken")}
        return SdkRequest(self.caller, self.ctx, stripped)


class McpFront:
    """The SDK server in front of a gateway, with what it knows of its clients."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._latest: weakref.ref[SessionCaller] | None = None
        self._typed_capabilities: BoundedTable[str, Any] = BoundedTable(_CAPABILITY_FORMS)  # by the form's repr
        self.server = self._build_server()

    def _build_server(self) -> Server[Any]:
        with no_deprecation_warnings():
            server: Server[Any] = _GatewayServer(
                "mcp-manifold",
                version=__version__,
                instructions=self.gateway.instructions(),
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_resource_templates,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_set_logging_level=self._set_logging_level,
                on_roots_list_changed=self._roots_changed,
                on_completion=self._complete,
                on_subscriptions_listen=GatewayListenHandler(self.gateway, self._request),
            )
        # The servers' extensions (SEP-2133) are the gateway's: read at each initialize and discover.
        server.extensions_now = lambda: merged_extensions(self.gateway.sync.extensions())
        for method in TASK_METHODS:
            server.add_request_handler(method, _TaskParams, self._no_tasks)
        server.middleware.append(refusing_stray_cancellations)  # ours first: around the rest (inside the SDK's tracing)
        server.middleware.append(self._track_client)
        # The state 2026-07-28 clients echo back is sealed on the way out and checked on the way in.
        self.state_boundary = RequestStateBoundary(
            request_state_security(self.gateway.settings, self.gateway.shared_request_state_codec),
            default_audience="mcp-manifold",
        )
        server.middleware.append(self.state_boundary)
        for surface in self.gateway.surfaces:
            middleware = surface.wire_middleware()
            if middleware is not None:
                server.middleware.append(middleware)
        return server

    # --- what the fast lane needs to answer a 2026-07-28 call as this server would ----------------

    def envelope_caller(
        self, params: dict[str, Any], principal: str | None = None, headers: dict[str, str] | None = None
    ) -> StatelessCaller | None:
        """The 2026-07-28 client a `tools/call`'s `_meta` envelope describes, read as the SDK server reads
        it (over HTTP with the request's `headers`, which must agree with it; stdio: no principal); None
        when the envelope fails the SDK's checks (the SDK answers those)."""
        route = classify_inbound_request({"method": "tools/call", "params": params}, headers=headers)
        if isinstance(route, InboundLadderRejection) or not meta_accepted(route.protocol_version, params.get("_meta")):
            return None
        envelope = _Envelope(route.protocol_version, self._capabilities(route.client_capabilities))
        return StatelessCaller(envelope, principal)

    def _capabilities(self, declared: Any) -> types.ClientCapabilities | None:
        """The capabilities an envelope declares, typed as the SDK types them (`Connection.from_envelope`).
        A client sends the same ones with every request, so each form is typed once, not per call; the
        form's `repr` is its key (parsed JSON: the same repr is the same value)."""
        try:
            key = repr(declared)
        except RecursionError:  # nested too deep to be any client's capabilities: typed (refused) afresh
            key = "?" * (_CAPABILITY_FORM_CHARS + 1)
        typed = self._typed_capabilities.get(key, _UNSEEN) if len(key) <= _CAPABILITY_FORM_CHARS else _UNSEEN
        if typed is _UNSEEN:
            typed = Connection.from_envelope(LATEST_MODERN_VERSION, None, declared).client_capabilities
            if len(key) <= _CAPABILITY_FORM_CHARS:
                self._typed_capabilities.keep(key, typed)
        return typed  # type: ignore[return-value]

    async def modern_result(self, params: dict[str, Any], version: str, result: Any) -> dict[str, Any]:
        """A `tools/call` result as this server sends it at 2026-07-28: its `requestState` sealed, the
        version's field sieve, `resultType`, and the server's own `serverInfo` stamp."""
        if isinstance(result, types.InputRequiredResult):
            result = await sealed(self.state_boundary, "tools/call", params, result)
        wire = (
            {**result.wire, "resultType": "complete"}  # a plain result is a complete one
            if isinstance(result, WireResult)
            else result.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        dumped = methods.serialize_server_result("tools/call", version, wire)
        dumped.setdefault("resultType", "complete")
        meta = dumped.get("_meta")
        if meta is None:
            dumped["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return dumped

    @cached_property
    def _server_info(self) -> dict[str, Any]:
        return self.server.server_info_stamp  # the SDK's copy; the lane only ever serializes it

    def initialization_options(self) -> Any:
        """None: the SDK then builds them at each `initialize`, with the servers' extensions known by then."""
        return None

    @property
    def latest_caller(self) -> Caller:
        """The client that made the latest request (over stdio, the only one); a detached one before any."""
        caller = self._latest() if self._latest is not None else None
        return caller if caller is not None else Caller("nobody-yet")

    # --- requests ------------------------------------------------------------------------------

    def _caller(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        connection = connection_of(ctx)
        caller = connection.state.get(_CALLER)
        if caller is None:
            identity = request_identity(ctx.request)  # who authenticated over HTTP, and their profile
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                principal = identity.principal if identity is not None else principal_of_request()
                caller = StatelessCaller(connection, principal)
            else:
                caller = SessionCaller(connection)
            if identity is not None:
                caller.principal, caller.profile = identity.principal, identity.profile
                caller.claims, caller.key_digest = identity.claims, identity.key_digest
            connection.state[_CALLER] = caller  # a 2026-07-28 request's connection lasts as long as it does
        return caller

    async def _track_client(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        caller = self._caller(ctx)
        identity = request_identity(ctx.request)
        if identity is not None and (identity.principal, identity.profile) != (caller.principal, caller.profile):
            # The SDK already keeps a session to the credential that opened it; this keeps it to its profile URL.
            raise MCPError(
                code=types.INVALID_REQUEST,
                message=f"this session was opened with profile {caller.profile!r}; open a new session for another",
            )
        if identity is not None:  # the credential its principal uses now (one key rotated out, or a token revoked)
            # A session goes on with any token of its principal (the SDK keeps it to client_id, iss and sub): the
            # claims kept were the opening token's, and once `auth.revoked` named it, the session's code-mode
            # calls and what it is sent unasked were refused though its requests came with a token still good.
            caller.key_digest, caller.claims = identity.key_digest, identity.claims
        if ctx.request_id is not None:
            if isinstance(caller, SessionCaller):
                self.gateway.back_channel.track(caller)
                self._latest = weakref.ref(caller)
                if not caller.arrived and caller.capabilities is not None:  # its initialize is done
                    caller.arrived = True
                    await self.gateway.client_arrived(caller)
            else:
                self.gateway.stateless_request(caller)
        return await call_next(ctx)

    def _request(self, ctx: ServerRequestContext[Any, Any], params: Any = None) -> SdkRequest:
        request = SdkRequest(self._caller(ctx), ctx)
        path_params = getattr(ctx.request, "path_params", None)  # HTTP: what the address names
        if path_params:
            request.endpoint = dict(path_params)
        if params is not None:  # a retry's answers to input_required, and the (unsealed) state it echoes
            request.input_responses = getattr(params, "input_responses", None)
            request.request_state = getattr(params, "request_state", None)
        return request

    async def _no_tasks(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> Any:
        # Tasks (the io.modelcontextprotocol/tasks extension) are not offered, so no task id came from here.
        task = f" {params.task_id!r}" if params.task_id else ""
        raise MCPError(
            code=types.METHOD_NOT_FOUND,
            message=(
                f"{ctx.method}: mcp-manifold does not offer tasks (the io.modelcontextprotocol/tasks extension), "
                f"so task{task} is not one of its own; its tool calls answer directly"
            ),
        )

    def _freshness(self, request: SdkRequest) -> dict[str, Any]:
        # ttlMs / cacheScope: 2026-07-28 only (the SDK leaves them off a session-era answer).
        ttl_ms, scope = self.gateway.list_freshness(request)
        return {"ttl_ms": ttl_ms, "cache_scope": scope}

    async def _answer(self, action: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run a request, turning our errors into MCP errors with a clear message (the one translation)."""
        try:
            return await work()
        except (InvalidRequest, NotFound) as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except BackendRequestError as exc:
            # The server answered with an MCP error: the client gets its code (not found, invalid
            # params, ...) and data as well as its message, as if it had asked the server itself.
            code = exc.code or types.INTERNAL_ERROR  # some servers answer code 0, which no client expects
            raise MCPError(code=code, message=f"{action} failed: {exc}", data=exc.data) from None
        except ManifoldError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{action} failed: {exc}") from None

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        request = self._request(ctx)
        tools = await self._answer("tools/list", lambda: self.gateway.list_tools(request))
        return types.ListToolsResult(tools=tools, **self._freshness(request))

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        request = self._request(ctx, params)
        return await self._answer(
            "tools/call", lambda: self.gateway.call_tool_by_name(request, params.name, params.arguments or {})
        )

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourcesResult:
        request = self._request(ctx)
        resources = await self._answer("resources/list", lambda: self.gateway.list_resources(request))
        return types.ListResourcesResult(resources=resources, **self._freshness(request))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        request = self._request(ctx)
        templates = await self._answer(
            "resources/templates/list", lambda: self.gateway.list_resource_templates(request)
        )
        return types.ListResourceTemplatesResult(resource_templates=templates, **self._freshness(request))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        request = self._request(ctx, params)
        return await self._answer("resources/read", lambda: self.gateway.read_resource_by_uri(request, str(params.uri)))

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListPromptsResult:
        request = self._request(ctx)
        prompts = await self._answer("prompts/list", lambda: self.gateway.list_prompts(request))
        return types.ListPromptsResult(prompts=prompts, **self._freshness(request))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        request = self._request(ctx, params)
        return await self._answer(
            "prompts/get", lambda: self.gateway.get_prompt_by_name(request, params.name, params.arguments)
        )

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        request = self._request(ctx)
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        return await self._answer(
            "completion/complete", lambda: self.gateway.complete(request, params.ref, argument, context)
        )

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> Any:
        request = self._request(ctx)
        await self._answer("resources/subscribe", lambda: self.gateway.subscribe(request, str(params.uri)))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> Any:
        await self.gateway.unsubscribe(self._request(ctx), str(params.uri))
        return types.EmptyResult()

    async def _roots_changed(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        await self.gateway.roots_changed(self._caller(ctx))

    async def _set_logging_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        request = self._request(ctx)
        await self._answer("logging/setLevel", lambda: self.gateway.set_logging_level(request, params.level))
        return types.EmptyResult()


def request_state_security(settings: Any, shared_codec: Any = None) -> RequestStateSecurity:
    """The keys that seal request state: the configured ones (shared by gateways behind one address), else
    the one the replicas share through `state_url` (`shared_codec`), else one made now for this process."""
    if settings.request_state_keys:
        return RequestStateSecurity(keys=list(settings.request_state_keys))
    if shared_codec is not None:
        return RequestStateSecurity(codec=shared_codec)
    return RequestStateSecurity.ephemeral()


def principal_of_request() -> str | None:
    """Who an authenticated HTTP request comes from (the SDK's auth context), or None."""
    token = get_access_token()
    if token is None:
        return None
    return f"{token.client_id}:{token.subject}" if token.subject else token.client_id


class _GatewayServer(Server[Any]):
    """The SDK server, advertising `listChanged` on every transport (HTTP builds its own options)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        everything = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options or everything, *args, **kwargs)

    extensions_now: Callable[[], dict[str, Any]] = staticmethod(dict)  # type: ignore[assignment]

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> types.ServerCapabilities:
        if extensions is None:
            extensions = self.extensions_now() or None
        return super().get_capabilities(notification_options, experimental_capabilities, extensions, **kwargs)


class _quiet:
    """Suppress failures of best-effort sends to a client that may have gone away."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc_type is None:
            return False
        if issubclass(exc_type, Exception):
            logger.debug("best-effort send failed: %s", exc)
            return True
        return False
