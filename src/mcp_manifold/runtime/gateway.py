"""The gateway: backends + catalog + surfaces behind one MCP server.

`Gateway` is an async context manager. Inside it, `server` is an SDK lowlevel `Server` whose
handlers ask the exposed surfaces, in order, who owns a name; the surfaces use the gateway's
`call_tool` / `read_resource` / `get_prompt` to reach a backend, with progress, logging,
cancellation and server-to-client requests passed through. The front (`front.py`) serves
`server` over stdio or streamable HTTP.
"""

from __future__ import annotations

import logging
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

from mcp_manifold import __version__
from mcp_manifold._errors import BackendError, BackendRequestError, InvalidRequest, ManifoldError, NotFound
from mcp_manifold.config import Config
from mcp_manifold.core.catalog import BackendListing, Catalog, Kind, unknown_resource
from mcp_manifold.core.result_cache import ResultCache
from mcp_manifold.core.results import spill_large
from mcp_manifold.core.summaries import bounded_list
from mcp_manifold.runtime import live_status
from mcp_manifold.runtime.backends import Backend, BackendPool
from mcp_manifold.runtime.health import HealthMonitor
from mcp_manifold.runtime.lineage import child_environment
from mcp_manifold.runtime.listing_cache import Listing, ListingCache
from mcp_manifold.runtime.spill import SpillStore, sweep_periodically

if TYPE_CHECKING:
    from mcp_manifold.runtime.search_index import CatalogSearch
from mcp_manifold.surfaces import CallContext, Surface, load_surface

logger = logging.getLogger(__name__)
T = TypeVar("T")

_SERVER_REQUEST_TYPES: dict[str, tuple[Any, Any]] = {
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


def tool_error(message: str) -> types.CallToolResult:
    """A tool result the client shows as an error, carrying our message and nothing else."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    # The SDK builds a ServerSession per request; the Connection behind it is per client.
    return ctx.session._connection


def _several_clients_waiting(backend: Backend) -> bool:
    """Whether calls of more than one client are in flight on `backend` (its messages are then unattributable)."""
    return len({id(_connection_of(waiting)) for waiting in backend.callers}) > 1


class Gateway:
    """One MCP endpoint in front of the configured backends."""

    def __init__(self, config: Config, *, serving: bool = False) -> None:
        self.config = config
        # A long-running `manifold serve` (not a one-shot CLI command): it answers the first listings
        # from the last run's cache while the servers start (listing_cache), and publishes its live
        # state for `manifold servers` (live_status).
        self.serving = serving
        self.started_at = time.time()
        self.listing_cache = ListingCache(Path(config.settings.data_dir).expanduser() / "listings")
        self.settings = config.settings
        self.pool = BackendPool(
            list(config.servers.values()), self.settings, self, child_env=child_environment(config.path)
        )
        self.surfaces: list[Surface] = []
        for name in self.settings.expose:
            self.surfaces.append(load_surface(name, self))
        reserved = [name for surface in self.surfaces for name in _reserved_names(surface)]
        self.catalog = Catalog(self.settings.separator, reserved_names=reserved)
        self.catalog.subscribe(self._on_catalog_change)
        self.result_cache = ResultCache(self.catalog, config.servers)
        spill_base = self.settings.spill_dir or str(Path(self.settings.data_dir) / "spill")
        self.spill = SpillStore(spill_base, ttl=self.settings.spill_ttl, allowed_dirs=self.settings.spill_allowed_dirs)
        self.bus = InMemorySubscriptionBus()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._recent_connection: weakref.ref[Connection] | None = None
        self._subscriptions: dict[str, weakref.WeakSet[Connection]] = {}
        self._listed: set[str] = set()
        self._refresh_lock = anyio.Lock()
        self._pending_changes: set[Kind] = set()
        self._changes = anyio.Event()
        self._exit: AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._search: CatalogSearch | None = None
        self.health = HealthMonitor(self.settings)  # issue 6: pings and reconnects
        self.server = self._build_server()

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        # Built inside `async with` so that a failure or a cancel (SIGTERM) part-way through start-up
        # still unwinds what was started: servers stopped, tasks cancelled, files removed.
        async with AsyncExitStack() as stack:
            stack.callback(self.spill.close)  # registered first, so it runs last
            await stack.enter_async_context(self.pool)
            task_group = await stack.enter_async_context(anyio.create_task_group())
            self._task_group = task_group
            stack.callback(task_group.cancel_scope.cancel)
            task_group.start_soon(self._announce_changes)
            task_group.start_soon(sweep_periodically, self.spill)
            # Health pings (issue 6) watch running backends, configured and added at run time.
            task_group.start_soon(self.health.run, self.pool.all_backends)
            if self.serving:
                task_group.start_soon(
                    live_status.publish, live_status.live_dir(self.settings.data_dir), self.live_snapshot
                )
            for surface in self.surfaces:
                await surface.start()
                # Surfaces with background work (the hub's discovery loop) run in this task group (issue 6).
                background = getattr(surface, "run", None)
                if callable(background):
                    task_group.start_soon(background)
            eager = [backend for backend in self.pool if not backend.lazy and backend.state != "disabled"]
            if eager:
                await self.refresh([backend.name for backend in eager])
            self._exit = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._exit is not None
        await self._exit.__aexit__(*exc_info)

    @property
    def backends(self) -> dict[str, Backend]:
        return self.pool.backends

    @property
    def search(self) -> CatalogSearch:
        """The search index over the catalog, built on first use."""
        if self._search is None:
            # Imported here: bm25s and numpy cost start-up time that surfaces without search never need.
            from mcp_manifold.runtime.search_index import CatalogSearch

            self._search = CatalogSearch(self.catalog, self.settings)
        return self._search

    # --- catalog ---------------------------------------------------------------------------

    async def ensure_catalog(self) -> None:
        """Start and list every enabled backend not listed yet (the first need of a lazy start)."""
        missing = [
            backend.name
            for backend in self.pool
            if backend.name not in self._listed and backend.state not in ("disabled",) and not _in_backoff(backend)
        ]
        if self.serving:
            missing = [name for name in missing if not self._list_from_cache(name)]
        if missing:
            await self.refresh(missing)

    def _list_from_cache(self, name: str) -> bool:
        """Fill the catalog from `name`'s cached listing and re-list it in the background."""
        backend = self.pool[name]
        listing = self.listing_cache.load(backend.config)
        if listing is None or self._task_group is None:
            return False
        self._set_listing(name, listing)
        self._task_group.start_soon(self._refresh_one, name)
        return True

    async def refresh(self, names: list[str]) -> None:
        """(Re)list the named backends concurrently; a failure leaves the others untouched."""
        async with anyio.create_task_group() as task_group:
            for name in names:
                task_group.start_soon(self._refresh_one, name)

    async def _refresh_one(self, name: str) -> None:
        backend = self.pool[name]
        try:
            tools, resources, templates, prompts = await backend.list_all()
        except ManifoldError as exc:
            logger.warning("%s", exc)
            return
        listing = Listing(tools, resources, templates, prompts)
        async with self._refresh_lock:
            self._set_listing(name, listing)
        if self.serving:
            self.listing_cache.save(backend.config, listing)

    def _set_listing(self, name: str, listing: Listing) -> None:
        config = self.pool[name].config
        self.catalog.set_backend(
            name,
            BackendListing(
                prefix=config.exposed_prefix,
                tools=listing.tools,
                resources=listing.resources,
                templates=listing.templates,
                prompts=listing.prompts,
                tool_filter=config.tools.allows,
            ),
        )
        self._listed.add(name)

    def _on_catalog_change(self, kinds: set[Kind]) -> None:
        self._pending_changes |= kinds
        self._changes.set()

    async def _announce_changes(self) -> None:
        """Tell every client what changed; runs as one task so notifications never block a handler."""
        while True:
            await self._changes.wait()
            self._changes = anyio.Event()
            kinds, self._pending_changes = self._pending_changes, set()
            await self.notify_list_changed(kinds)

    async def notify_list_changed(self, kinds: set[Kind], connection: Connection | None = None) -> None:
        """Send `list_changed` for `kinds` to one connection, or to all of them."""
        targets = [connection] if connection is not None else list(self._connections)
        events = {"tools": ToolsListChanged(), "resources": ResourcesListChanged(), "prompts": PromptsListChanged()}
        if connection is None:
            for kind in kinds:
                await self.bus.publish(events[kind])
        for target in targets:
            with _quiet():
                if "tools" in kinds:
                    await target.send_tool_list_changed()
                if "resources" in kinds:
                    await target.send_resource_list_changed()
                if "prompts" in kinds:
                    await target.send_prompt_list_changed()

    # --- calls into backends (used by surfaces) ----------------------------------------------

    async def call_tool(
        self,
        call: CallContext,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Call `tool` on `server`; backend failures become tool errors with the backend's message.

        `meta` is sent as the request's `_meta`. Results of tools the config lets the gateway cache
        (`cache_ttl`, read-only or idempotent tools) are reused while fresh.
        """
        backend = self._backend(server)
        cached = self.result_cache.lookup(server, tool, arguments)
        if cached is not None:
            return cached
        ctx = call.request
        wants_progress = ctx.meta is not None and ctx.meta.get("progress_token") is not None

        async def forward_progress(progress: float, total: float | None, message: str | None) -> None:
            with _quiet():
                await ctx.session.report_progress(progress, total, message)

        try:
            async with backend.serving(ctx):
                result: types.CallToolResult = await backend.request(
                    "tools/call",
                    lambda session: session.call_tool(
                        tool,
                        arguments,
                        progress_callback=forward_progress if wants_progress else None,
                        meta=meta,  # type: ignore[arg-type]
                    ),
                )
        except BackendError as exc:
            return tool_error(str(exc))
        self.result_cache.store(server, tool, arguments, result)
        return result

    async def read_resource(self, call: CallContext, server: str, uri: str) -> types.ReadResourceResult:
        backend = self._backend(server)
        async with backend.serving(call.request):
            result = await backend.request("resources/read", lambda session: session.read_resource(uri))
        # Contents name the URI the client can read again: the exposed one.
        contents = [c.model_copy(update={"uri": self.catalog.exposed_uri(server, c.uri)}) for c in result.contents]
        return result.model_copy(update={"contents": contents})

    async def get_prompt(
        self, call: CallContext, server: str, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        backend = self._backend(server)
        async with backend.serving(call.request):
            return await backend.request("prompts/get", lambda session: session.get_prompt(name, arguments))

    def live_snapshot(self) -> dict[str, Any]:
        """What `manifold servers` shows of this running gateway: servers, health, breakers, instances."""
        servers = []
        for backend in self.pool:
            row = asdict(backend.status())
            health = self.health.health.get(backend.name)
            row["health"] = health.state if health is not None else None
            servers.append(row)
        instances: list[dict[str, Any]] = []
        for surface in self.surfaces:
            rows = getattr(surface, "live_rows", None)
            if callable(rows):
                instances.extend(rows())
        return {
            "started_at": self.started_at,
            "expose": list(self.settings.expose),
            "servers": servers,
            "instances": instances,
        }

    def fast_route(self, name: str) -> tuple[Backend, str] | None:
        """Where a plain call of `name` can go by the fast lane, or None when it needs the full path.

        Only a gateway that shows nothing but `direct` qualifies (other surfaces may own names per
        session), and only a running backend, with no spilling or result caching to apply.
        """
        if len(self.surfaces) != 1 or self.surfaces[0].name != "direct" or self.settings.spill_threshold:
            return None
        if not self.catalog.has_tool(name):
            return None
        entry = self.catalog.tool(name)
        backend = self.backends.get(entry.server)
        if backend is None or backend.state != "ready" or backend.config.cache_ttl:
            return None
        return backend, entry.original.name

    def _backend(self, server: str) -> Backend:
        # Backends added at run time (hub instances, issue 6) are reached by name too.
        backend = self.backends.get(server) or self.pool.added.get(server)
        if backend is None:
            raise NotFound(f"unknown server {server!r}")
        return backend

    # --- what backends initiate (BackendHooks) ----------------------------------------------

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        method = getattr(notification, "method", "")
        if method in (
            "notifications/tools/list_changed",
            "notifications/resources/list_changed",
            "notifications/prompts/list_changed",
        ):
            # Not inline: this runs on the backend's read loop, which must stay free to deliver the listing.
            assert self._task_group is not None
            self._task_group.start_soon(self._refresh_one, backend.name)
        elif method == "notifications/resources/updated":
            uri = self.catalog.exposed_uri(backend.name, notification.params.uri)  # type: ignore[union-attr]
            await self.bus.publish(ResourceUpdated(uri))
            for connection in list(self._subscriptions.get(uri, ())):
                with _quiet():
                    await connection.send_resource_updated(uri)

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        name = f"{backend.name}.{params.logger}" if params.logger else backend.name
        caller = backend.current_caller
        if _several_clients_waiting(backend):
            # A log message names no request: sending it to one of them would be a guess, and a
            # wrong guess shows one client another's data.
            logger.debug("%s: log message dropped: calls of several clients are in flight", backend.name)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            if caller is not None:
                with _quiet():
                    await caller.session.send_log_message(
                        params.level, params.data, logger=name, related_request_id=caller.request_id
                    )
                return
            for connection in list(self._connections):
                with _quiet():
                    await connection.log(params.level, params.data, logger=name)

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        """Forward sampling, elicitation and roots to the client whose call is waiting on `backend`."""
        request_type, result_type = _SERVER_REQUEST_TYPES[method]
        request = request_type(params=params) if params is not None else request_type()
        caller = backend.current_caller
        if _several_clients_waiting(backend):
            # Nothing tells whose call this request belongs to; asking the wrong client would show it
            # another's data (and let it answer for them), so the server gets a clear refusal.
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"calls of several clients are in flight on server {backend.name!r}: cannot tell "
                f"which client {method} is for; try again when the other calls are done",
            )
        if caller is not None:
            return await caller.session.send_request(
                request, result_type, metadata=ServerMessageMetadata(related_request_id=caller.request_id)
            )
        connection = self._recent_connection() if self._recent_connection else None
        if connection is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"no client connected to answer {method}")
        return await connection.send_request(request)

    # --- the MCP server ---------------------------------------------------------------------

    def _build_server(self) -> Server[Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server: Server[Any] = _GatewayServer(
                "mcp-manifold",
                version=__version__,
                instructions=self.instructions(),
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
                on_subscriptions_listen=ListenHandler(self.bus),
            )
        server.middleware.append(self._track_connection)
        return server

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    def instructions(self) -> str:
        """One line naming the servers behind the gateway (surfaces that hide tools describe them more)."""
        names = [config.name for config in self.config.servers.values() if config.enabled]
        return f"mcp-manifold gateway in front of {len(names)} MCP server(s): {bounded_list(names, budget=200)}."

    async def _track_connection(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        connection = _connection_of(ctx)
        self._connections.add(connection)
        if ctx.request_id is not None:
            self._recent_connection = weakref.ref(connection)
        return await call_next(ctx)

    def _call_context(self, ctx: ServerRequestContext[Any, Any]) -> CallContext:
        return CallContext(ctx, _connection_of(ctx))

    async def _answer(self, action: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run a non-tool request, turning our errors into MCP errors with a clear message."""
        try:
            return await work()
        except InvalidRequest as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except NotFound as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        except BackendRequestError as exc:
            # The server answered with an MCP error: the client gets its code (not found, invalid
            # params, ...) as well as its message, as if it had asked the server itself.
            code = exc.code or types.INTERNAL_ERROR  # some servers answer code 0, which no client expects
            raise MCPError(code=code, message=f"{action} failed: {exc}") from None
        except ManifoldError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{action} failed: {exc}") from None

    async def _needs_catalog(self) -> None:
        if any(surface.needs_catalog for surface in self.surfaces):
            await self.ensure_catalog()

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        await self._needs_catalog()
        call = self._call_context(ctx)
        tools: dict[str, types.Tool] = {}
        for surface in self.surfaces:
            for tool in surface.list_tools(call):
                tools.setdefault(tool.name, tool)
        return types.ListToolsResult(tools=list(tools.values()))

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        call = self._call_context(ctx)
        name, arguments = params.name, params.arguments or {}
        surface = self._owner(lambda s: s.owns_tool(call, name))
        if surface is None:
            await self._needs_catalog()
            surface = self._owner(lambda s: s.owns_tool(call, name))
        if surface is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name!r}")
        try:
            result = await surface.call_tool(call, name, arguments)
        except ManifoldError as exc:
            return tool_error(str(exc))
        # Global spill (issue 5): a large result of any surface goes to a file; `dispatch` spills its own.
        if self.settings.spill_threshold and not getattr(surface, "spills_results", False):
            try:
                result = spill_large(
                    result,
                    self.spill,
                    threshold=self.settings.spill_threshold,
                    toon=self.settings.toon,
                    ttl=self.settings.spill_ttl,
                )
            except OSError as exc:
                logger.warning("could not spill the result of %s, answering inline: %s", name, exc)
        return result

    def _owner(self, predicate: Callable[[Surface], bool]) -> Surface | None:
        return next((surface for surface in self.surfaces if predicate(surface)), None)

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourcesResult:
        await self._needs_catalog()
        call = self._call_context(ctx)
        return types.ListResourcesResult(resources=[r for s in self.surfaces for r in s.list_resources(call)])

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        await self._needs_catalog()
        call = self._call_context(ctx)
        templates = [t for s in self.surfaces for t in s.list_resource_templates(call)]
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        call = self._call_context(ctx)
        uri = str(params.uri)

        async def work() -> types.ReadResourceResult:
            surface = self._owner(lambda s: s.owns_resource(call, uri))
            if surface is None:
                await self._needs_catalog()
                surface = self._owner(lambda s: s.owns_resource(call, uri))
            if surface is None:
                raise unknown_resource(uri)
            return await surface.read_resource(call, uri)

        return await self._answer("resources/read", work)

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListPromptsResult:
        await self._needs_catalog()
        call = self._call_context(ctx)
        return types.ListPromptsResult(prompts=[p for s in self.surfaces for p in s.list_prompts(call)])

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        call = self._call_context(ctx)

        async def work() -> types.GetPromptResult:
            surface = self._owner(lambda s: s.owns_prompt(call, params.name))
            if surface is None:
                await self._needs_catalog()
                surface = self._owner(lambda s: s.owns_prompt(call, params.name))
            if surface is None:
                raise NotFound(f"unknown prompt {params.name!r}")
            return await surface.get_prompt(call, params.name, params.arguments)

        return await self._answer("prompts/get", work)

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> Any:
        uri = str(params.uri)

        async def work() -> types.EmptyResult:
            await self._needs_catalog()
            route = self.catalog.route_resource(uri)
            backend = self._backend(route.server)
            await backend.request("resources/subscribe", lambda session: session.subscribe_resource(route.original))
            self._subscriptions.setdefault(uri, weakref.WeakSet()).add(_connection_of(ctx))
            return types.EmptyResult()

        return await self._answer("resources/subscribe", work)

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams) -> Any:
        uri = str(params.uri)
        subscribers = self._subscriptions.get(uri)
        if subscribers is not None:
            subscribers.discard(_connection_of(ctx))
            if not subscribers:
                del self._subscriptions[uri]
                with _quiet():
                    route = self.catalog.route_resource(uri)
                    backend = self._backend(route.server)
                    await backend.request(
                        "resources/unsubscribe", lambda session: session.unsubscribe_resource(route.original)
                    )
        return types.EmptyResult()

    async def _set_logging_level(self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        """Pass the client's log level on to every running backend that logs (hub instances too)."""
        for backend in self.pool.all_backends():
            if backend.state == "ready":
                with _quiet():
                    await backend.request("logging/setLevel", lambda session: session.set_logging_level(params.level))
        return types.EmptyResult()


class _GatewayServer(Server[Any]):
    """The SDK server, advertising `listChanged` on every transport (HTTP builds its own options)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        everything = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options or everything, *args, **kwargs)


def _in_backoff(backend: Backend) -> bool:
    return backend.state == "failed" and (backend.status().retry_in or 0) > 0


def _reserved_names(surface: Surface) -> list[str]:
    """The tool names a non-direct surface always shows, reserved so backend tools never take them."""
    names = getattr(surface, "reserved_tool_names", None)
    if callable(names):
        return list(names())
    reserved = getattr(surface, "reserved_tools", None)
    return [tool.name for tool in reserved()] if callable(reserved) else []


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
