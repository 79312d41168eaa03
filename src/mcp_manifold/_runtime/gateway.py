"""The gateway: the runtime behind one MCP endpoint, and the host its surfaces reach it through.

`Gateway` is an async context manager that owns, for as long as it runs: the backends (one session
per configured server), the catalog and what keeps it listed, the one call path into backends, the
back channel to clients, the stores (spill files, listing cache, search index), health pings, and
the surfaces the config exposes. It knows nothing of the MCP wire: the front (`front/server.py`)
turns client requests into `Request`s and asks the gateway, which asks the surfaces in `expose` order
who owns a name. Surfaces see the gateway only as a `Host` (surfaces/base.py).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import weakref
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import mcp_types as types

from mcp_manifold._config import Config, ServerConfig, Settings
from mcp_manifold._core.catalog import Catalog, Kind, Match, unknown_resource
from mcp_manifold._core.catalog_view import CatalogView
from mcp_manifold._core.clients import Caller, Request, most_verbose
from mcp_manifold._core.common_extensions import CommonExtensions
from mcp_manifold._core.limits import Limits, PrincipalLimits
from mcp_manifold._core.profiles import for_profile
from mcp_manifold._core.result_cache import ResultCache
from mcp_manifold._core.results import SpillPolicy, ToolAnswer, tool_error
from mcp_manifold._core.router import Target
from mcp_manifold._core.status import BackendStatus
from mcp_manifold._core.suggestions import did_you_mean, quoted
from mcp_manifold._core.summaries import bounded_list
from mcp_manifold._errors import BackendRequestError, ManifoldError, NotFound
from mcp_manifold._runtime import live_status, log_scrub
from mcp_manifold._runtime.access import Access
from mcp_manifold._runtime.audit import STREAM, AuditLog, StreamAuditLog, audit_dir
from mcp_manifold._runtime.back_channel import BackChannel
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.call_path import CallPath
from mcp_manifold._runtime.catalog_sync import CatalogSync
from mcp_manifold._runtime.client_sessions import ClientSessions
from mcp_manifold._runtime.could_not_ask import CLIENT_MUST_ACT
from mcp_manifold._runtime.health import HealthMonitor
from mcp_manifold._runtime.input_bridge import HeldCalls
from mcp_manifold._runtime.lineage import child_environment
from mcp_manifold._runtime.listing_cache import ListingCache
from mcp_manifold._runtime.pin_store import PinStore, unpinned_rows
from mcp_manifold._runtime.pool import BackendPool
from mcp_manifold._runtime.private_files import folder_of, secure_data_dir
from mcp_manifold._runtime.processes import run_shell
from mcp_manifold._runtime.relists import Relists
from mcp_manifold._runtime.reload import ConfigReloader
from mcp_manifold._runtime.spill import SpillStore, sweep_periodically
from mcp_manifold._runtime.state_file import JsonStateFile
from mcp_manifold._runtime.worker_processes import WorkerProcesses
from mcp_manifold._sdk import no_deprecation_warnings
from mcp_manifold._surfaces import Surface, load_surface

if TYPE_CHECKING:
    from mcp_manifold._runtime.instances import InstanceRegistry
    from mcp_manifold._runtime.search_index import CatalogSearch
    from mcp_manifold._runtime.shared_state.shared import SharedState

logger = logging.getLogger(__name__)
# How long a 2026-07-28 client may keep a list once the catalog has settled (see Gateway.list_freshness).
LIST_TTL_MS = 60_000


class Gateway:
    """One MCP endpoint in front of the configured backends."""

    def __init__(self, config: Config, *, serving: bool = False, single_client: bool = False) -> None:
        self.config = config
        # Whose gateway this is, for `manifold servers`: resolved once, as the file was when it was loaded. A
        # reload keeps the path, and resolving it again later could raise (a symlink loop made of it meanwhile).
        self._config_file = str(config.path.resolve()) if config.path is not None else None
        self._settings = config.settings
        # One client only (the stdio front): servers are told what it can be asked for, and what they
        # ask outside any call goes to it. Otherwise shared sessions promise nothing (see `_sole_client`).
        self.single_client = single_client
        self._sole: Caller | None = None
        # A long-running `manifold serve` (not a one-shot CLI command): it answers the first listings
        # from the last run's cache while the servers start, and publishes its live state.
        self.serving = serving
        self.started_at = time.time()
        data_dir = Path(self._settings.data_dir).expanduser()
        self.data_dir = data_dir
        secure_data_dir(data_dir)  # before anything in it is opened: private, and tightened if it was not
        self._search: CatalogSearch | None = None
        self._instances: InstanceRegistry | None = None  # made when a surface (the hub) asks for it
        # Surfaces first: their always-shown tool names are reserved in the catalog.
        self.surfaces: list[Surface] = [load_surface(name, self) for name in self._settings.expose]
        reserved = [name for surface in self.surfaces for name in surface.reserved_tool_names()]
        self._catalog = Catalog(self._settings.separator, reserved_names=reserved)
        self.back_channel = BackChannel(
            self._catalog,
            relist=self._relist,
            may_see=lambda caller, server: self.access.may_see_server(caller, server),
            may_read=lambda caller, server, uri: self.access.may_read_resource(caller, server, uri),
            may_see_item=lambda caller, kind, server, name: self.access.may_see_item(caller, kind, server, name),
        )
        self.relists = Relists(hold=self._settings.pinning == "enforce")
        self._relisting: dict[Backend, bool] = {}  # a backend being re-listed -> announced again meanwhile
        self.back_channel.tools_announced = self.relists.announced
        self.back_channel.unsubscribed = self._release_subscriptions
        self._catalog.subscribe(self.back_channel.catalog_changed)
        child_env = child_environment(config.path)
        # What the clients of a shared session-era session all declare of extensions (SEP-2133).
        self.common_extensions = CommonExtensions(self._settings.client_session_idle)
        self.pool = BackendPool(
            list(config.servers.values()),
            self._settings,
            self.back_channel,
            child_env=child_env,
            client=self._sole_client,
            shared_extensions=self.common_extensions.common,
        )
        self.client_sessions = ClientSessions(self._settings, self.back_channel, child_env, single_client=single_client)
        self._views: weakref.WeakKeyDictionary[Caller, tuple[int, int, Catalog]] = weakref.WeakKeyDictionary()
        self._catalog_version = 0
        self._catalog.subscribe(self._count_change)
        # Pins judge each listing before the catalog takes it: a changed tool is quarantined before any
        # client can see the change.
        self.pins = PinStore(
            data_dir,
            self._settings.pinning,  # type: ignore[arg-type]
            self._settings.pin_new_tools,  # type: ignore[arg-type]
            max_tools=self._settings.pin_max_tools,
        )
        self.sync = CatalogSync(
            self.pool, self._catalog, ListingCache(data_dir / "listings"), serving=serving, on_listing=self.pins.observe
        )
        self.client_sessions.on_listing = self.pins.observe
        self.client_sessions.on_closed = self.pins.forget_session
        self.result_cache = ResultCache(self._catalog, config.servers)
        spill_base = self._settings.spill_dir or str(data_dir / "spill")
        self.spill = SpillStore(
            spill_base,
            ttl=self._settings.spill_ttl,
            max_bytes=self._settings.spill_max_bytes,
            allowed_dirs=self._settings.spill_allowed_dirs,
            shared=self._settings.state_url is not None,  # spill_dir on a volume every replica mounts
        )
        self.held_calls = HeldCalls(self._settings.held_call_timeout)
        # Replicas started from one config share state through `state_url` (shared_state/); unset, nothing of
        # it is imported and this process keeps its state itself.
        self.replica_id = self._settings.replica_id or f"{socket.gethostname()}-{os.getpid()}"
        self.shared: SharedState | None = None
        if self._settings.state_url:
            from mcp_manifold._runtime.shared_state.shared import SharedState

            self.shared = SharedState(self._settings, self.replica_id, self.held_calls, self.replica_row)
            self.shared.share_pins(self.pins, self._pins_changed)
            self.shared.share_listen_streams(self.back_channel)
            self.shared.share_learning(self.sync.cache, self._every_backend)
        self.calls = CallPath(
            self.pool,
            self.client_sessions,
            self._catalog,
            self.result_cache,
            self.spill,
            SpillPolicy(
                threshold=self._settings.spill_threshold, toon=self._settings.toon, ttl=self._settings.spill_ttl
            ),
            self.held_calls,
        )
        self.access = Access(
            lambda: self.config,
            self._catalog,
            self.pins,
            self._limits(),
            self._search_allowed,
        )
        self.calls.policy = self.access
        self.calls.relists = self.relists
        if self._settings.pinning != "off":
            self.calls.judge_app = self.access.judge_app
        self.access.refused = self.calls.refused
        self.audit: AuditLog | None = None
        if self._settings.audit:
            self.audit = self._audit_log()
            self.calls.observe(self.audit)
        self.health = HealthMonitor(self._settings)
        self.search_observers: list[Callable[[float], None]] = []  # told each search's seconds (metrics)
        # Told each server gone (a hub instance with a generated id, a server a reload removed): what is kept
        # by server goes (metrics).
        self.forget_observers: list[Callable[[str], None]] = []
        # A serving gateway applies edits of its config file while it runs (and on request: SIGHUP).
        self.reloader = ConfigReloader(self, watch=self._settings.reload) if serving and config.path else None
        self._exit: AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._eager: list[str] = []  # eager servers waiting for the client of a stdio gateway
        self._servers_log_level: types.LoggingLevel | None = None  # what servers were last asked for (setLevel)
        self.stateless_requests = 0  # requests of 2026-07-28 clients so far
        self.last_stateless_request: float | None = None

    def _audit_log(self) -> AuditLog:
        settings = self._settings
        replica = self.replica_id if settings.state_url or settings.replica_id else None
        if settings.audit_path == STREAM:  # stdout, unless it carries MCP (a stdio gateway): then stderr
            return StreamAuditLog(stdout=settings.http, replica=replica)
        directory = audit_dir(self.data_dir, settings.audit_path)
        with folder_of("audit_path", directory):
            return AuditLog(directory, settings.audit_max_bytes, settings.audit_backups, replica)

    def _limits(self) -> Limits:
        settings = self._settings
        local = PrincipalLimits(settings.rate_limit, settings.rate_burst, settings.principal_max_calls)
        return self.shared.shared_limits(local, self._longest_call) if self.shared is not None else local

    def _longest_call(self) -> float:
        """Seconds the longest call may run by the config now: a server's own `timeout` may exceed `call_timeout`,
        and a reload may change either (a shared in-flight slot must outlive its call)."""
        timeouts = [server.timeout for server in self.config.servers.values() if server.timeout]
        return max([self._settings.call_timeout, *timeouts])

    # --- lifecycle -------------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        # Built inside `async with` so that a failure or a cancel (SIGTERM) part-way through start-up
        # still unwinds what was started: servers stopped, tasks cancelled, files removed.
        async with AsyncExitStack() as stack:
            stack.callback(self.spill.close)  # registered first, so it runs last
            # The log never shows a server's secret, whatever a line quotes (until the servers have stopped).
            stack.callback(log_scrub.install(lambda: [backend.config for backend in self.pool.all_backends()]))
            if self._settings.tracing:
                await self._start_tracing(stack)
            stack.callback(self.pins.close)
            if self.audit is not None:
                stack.callback(self.audit.close)
            self.pins.load()  # earlier runs' quarantines hold from the first request on
            await stack.enter_async_context(self.pool)
            task_group = await stack.enter_async_context(anyio.create_task_group())
            self._task_group = task_group
            stack.callback(task_group.cancel_scope.cancel)
            if self.shared is not None:
                stack.push_async_callback(self.shared.stop)
                await self.shared.start(task_group)
            self.sync.attach(task_group)
            await task_group.start(self.back_channel.run)
            await task_group.start(self.client_sessions.run)
            await task_group.start(self.held_calls.run)
            task_group.start_soon(sweep_periodically, self.spill)
            # Health pings watch running backends, configured and added at run time.
            task_group.start_soon(self.health.run, self.pool.all_backends)
            if self.serving:
                directory = live_status.live_dir(self._settings.data_dir)
                task_group.start_soon(live_status.publish, directory, self.live_snapshot)
            if self.reloader is not None:
                await task_group.start(self.reloader.run)
                stack.callback(self.reloader.stop_watching)  # runs before the cancel: see stop_watching
            if self.serving and self._settings.pinning != "off":
                # `manifold pins approve` in another process: clients' lists change when it does.
                task_group.start_soon(self.pins.watch, self._pins_changed)
            for surface in self.surfaces:
                await surface.start()
                task_group.start_soon(surface.run)  # background work (the hub's discovery), if any
            eager = [backend.name for backend in self.pool if not backend.lazy and backend.state != "disabled"]
            if eager and self.single_client:
                # Started once the client is known, so that they are told what it can be asked for.
                self._eager = eager
            elif eager and self.serving:
                self.sync.start_eager(eager)  # behind the cache, as lazy ones: initialize never waits
            elif eager:
                await self.sync.refresh(eager)  # a one-shot command wants them listed before it goes on
            self._exit = stack.pop_all()
        return self

    async def _start_tracing(self, stack: AsyncExitStack) -> None:
        # Imported here: the OpenTelemetry SDK is an extra, loaded only by a gateway that traces.
        from mcp_manifold._runtime.tracing import CallTracer, start_tracing

        provider = start_tracing()
        if provider is not None:

            async def flush() -> None:  # the spans of the last calls still go out, within 5 s
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await anyio.to_thread.run_sync(provider.shutdown, abandon_on_cancel=True)

            stack.push_async_callback(flush)
        stack.callback(self.calls.around(CallTracer()))

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._exit is not None
        await self._exit.__aexit__(*exc_info)

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        """Where the gateway's background work runs (it is cancelled, and waited for, as the gateway stops)."""
        if self._task_group is None:
            raise RuntimeError("the gateway is not running (use `async with Gateway(...)`)")
        return self._task_group

    @property
    def backends(self) -> dict[str, Backend]:
        """The configured backends by name (hub instances are in `pool.added`)."""
        return self.pool.backends

    @property
    def search_index(self) -> CatalogSearch:
        """The search index over the catalog, built on first use."""
        if self._search is None:
            # Imported here: bm25s and numpy cost start-up time that surfaces without search never need.
            from mcp_manifold._runtime.search_index import CatalogSearch

            self._search = CatalogSearch(self._catalog, self._settings)
        return self._search

    @property
    def secured(self) -> bool:
        """Whether callers are told apart (authentication or profiles): then what one sees is not another's."""
        return bool(self.config.profiles) or self.config.auth.enabled

    def instructions(self) -> str:
        """One line naming the servers behind the gateway (surfaces that hide tools describe them more).

        With profiles or authentication every client gets the same instructions, so they name no server.
        """
        if self.secured:
            return "mcp-manifold gateway: list the tools to see what you may use."
        names = [config.name for config in self.config.servers.values() if config.enabled]
        return f"mcp-manifold gateway in front of {len(names)} MCP server(s): {bounded_list(names, budget=200)}."

    def live_snapshot(self) -> dict[str, Any]:
        """What `manifold servers` shows of this running gateway: servers, health, breakers, instances."""
        servers = []
        for backend in self.pool:
            row = asdict(backend.status())
            health = self.health.health.get(backend.name)
            row["health"] = health.state if health is not None else None
            servers.append(row)
        return {
            "started_at": self.started_at,
            "config": self._config_file,
            "replica": self.replica_id if self.shared is not None else None,
            "expose": list(self._settings.expose),
            "servers": servers,
            "instances": [row for surface in self.surfaces for row in surface.live_rows()],
            "clients": self._clients(),
            "unpinned": unpinned_rows(self.pins.unpinned()),
        }

    def replica_row(self) -> dict[str, Any]:
        """This replica's row in the shared status: its servers' states and its clients. Built apart from
        `live_snapshot`, so what only that one reads (the hub's instances, say) never stops the heartbeat."""
        servers = {backend.name: backend.state for backend in self.pool}
        return {"started_at": self.started_at, "servers": servers, "clients": self._clients()}

    def _clients(self) -> dict[str, Any]:
        return {
            "sessions": self.back_channel.session_count(),
            "stateless_requests": self.stateless_requests,
            "last_stateless_request": self.last_stateless_request,
            "listen_streams": self.back_channel.listen_streams,
        }

    def _every_backend(self) -> list[Backend]:
        """Every session to a server: the shared ones, hub instances and clients' own."""
        return [*self.pool.all_backends(), *self.client_sessions.sessions()]

    async def replica_rows(self) -> list[dict[str, Any]]:
        """Every replica's row (id, address, servers, clients) when replicas share state; else none."""
        if self.shared is None:
            return []
        return await self.shared.replica_rows()

    @property
    def shared_request_state_codec(self) -> Any:
        """What seals 2026-07-28 request state with the key every replica shares (state_url set, no
        request_state_keys): a `RequestStateCodec`, or None."""
        if self.shared is None or self.shared.request_state_key is None:
            return None
        from mcp_manifold._runtime.shared_state.sealing import SharedKeyCodec  # only with state_url

        return SharedKeyCodec(self.shared.request_state_key)

    async def ready(self) -> bool:
        """Whether a balancer may send this replica requests: eager servers listed once, shared state reachable."""
        if self.sync.starting():
            return False
        return self.shared is None or await self.shared.reachable()

    async def _relist(self, backend: Backend) -> None:
        """A server said its lists changed: list it again (a client's own session: for that client).

        One listing of a backend runs at a time: an announcement while it runs asks for one more after
        it, so a server announcing thousands of changes in a burst costs two listings, not thousands
        at once (each a full listing of it, and a judging of every tool by the pins)."""
        if backend in self._relisting:
            self._relisting[backend] = True
            return
        self._relisting[backend] = True
        try:
            while self._relisting[backend]:
                self._relisting[backend] = False
                await self._relist_once(backend)
        finally:
            del self._relisting[backend]

    async def _relist_once(self, backend: Backend) -> None:
        """Calls to it that wait for this listing (`relists`) go ahead when it is done."""
        begun = self.relists.begin(backend.name)
        try:
            if backend.owner is None:
                await self.sync.relist(backend)
                return
            owner = await self.client_sessions.relist(backend)
            if owner is not None:
                await self.back_channel.notify_list_changed({"tools", "resources", "prompts"}, owner)
        finally:
            self.relists.done(backend.name, begun)

    def _count_change(self, kinds: set[Kind]) -> None:
        self._catalog_version += 1

    def catalog_for(self, request: Request) -> Catalog:
        """The catalog as this client sees it: the shared one, with what its own sessions listed instead
        (`session_scope: client`)."""
        listings = self.client_sessions.listings(request.caller)
        if not listings:
            return self._catalog
        seen = self._views.get(request.caller)
        if seen is not None and seen[:2] == (self._catalog_version, self.client_sessions.version):
            return seen[2]
        view = self._catalog.with_listings(listings)
        self._views[request.caller] = (self._catalog_version, self.client_sessions.version, view)
        return view

    # --- clients ---------------------------------------------------------------------------------

    def _sole_client(self) -> Caller | None:
        """The one client every shared session serves: a stdio gateway's, once known. Over HTTP None: a
        shared session then promises its server nothing it could be asked for, since a later client may
        declare less (clients that should be asked get sessions of their own: `session_scope: client`), and
        only the extensions all its clients declare (`common_extensions`)."""
        return self._sole

    async def client_arrived(self, caller: Caller) -> None:
        """A client finished its handshake (the front calls this once per client)."""
        logger.info("client %s connected: session era (the handshake)", caller.key)
        if self._servers_log_level is not None:  # servers were asked for less: it wants every level until it says
            await self._ask_servers_log_level([caller.log_level])
        if not self.single_client:
            self.common_extensions.client_arrived(caller)
            return
        if self._sole is not None:
            return
        self._sole = caller
        self.back_channel.sole_client(caller)
        for backend in self.pool:
            await backend.renew_if_declared_differs()  # started before the client came (a CLI probe, say)
        if self._eager and self._task_group is not None:
            eager, self._eager = self._eager, []
            if self.serving:
                self.sync.start_eager(eager)  # behind their cached listings, as lazy ones
            else:
                self._task_group.start_soon(self.sync.refresh, eager)

    def stateless_request(self, caller: Caller) -> None:
        """A 2026-07-28 client made a request (counted for `manifold servers`; it has no session to track)."""
        if not self.stateless_requests:
            logger.info("first request of a 2026-07-28 client (no session; each request stands alone)")
        logger.debug("2026-07-28 request from %s", caller.key)
        self.stateless_requests += 1
        self.last_stateless_request = time.time()
        if not self.single_client:
            self.common_extensions.stateless_request(caller)
        if self.single_client and self._sole is None:
            self._sole = caller  # over stdio, the one client whatever its era; its capabilities ride each request
            self.back_channel.sole_client(caller)

    async def roots_changed(self, caller: Caller) -> None:
        """A client's roots changed: tell the servers whose sessions it is the client of."""
        mine = self.client_sessions.sessions(caller) + (self.pool.all_backends() if caller is self._sole else [])
        for backend in mine:
            await backend.roots_changed()

    async def _pins_changed(self) -> None:
        """An operator approved or rejected a tool: what clients may see changed, their resources too where a tool
        now held, or used again, names an app (it is listed only while one of its tools may be used). Before, only
        `tools/list_changed` was sent, though the app had left (or come back to) their `resources/list`."""
        tools = (
            (server, self._catalog.exposed_name("tool", server, tool)) for server, tool in self.pins.take_flipped()
        )
        apps = self._catalog.apps_named((server, name) for server, name in tools if name is not None)
        await self.back_channel.notify_list_changed({"tools", "resources"} if apps else {"tools"})

    # --- the Host surfaces see ---------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def servers(self) -> Mapping[str, ServerConfig]:
        return self.config.servers

    @property
    def catalog(self) -> Catalog:
        """The whole catalog (the CLI's and library use's); surfaces read it through `view(request)`."""
        return self._catalog

    def view(self, request: Request) -> CatalogView:
        return self.access.view(request, self.catalog_for(request))

    def holds_profile(self, caller: Caller) -> bool:
        return self.access.holds_profile(caller)

    def may_see_server(self, caller: Caller, server: str) -> bool:
        return self.access.may_see_server(caller, server)

    async def _search_allowed(
        self,
        query: str,
        limit: int,
        server: str | None,
        allowed: Callable[[str], bool] | None,
        catalog: Catalog | None = None,
    ) -> list[Match]:
        started = time.perf_counter()
        matches = await self.search_index.find(query, limit=limit, server=server, allowed=allowed, catalog=catalog)
        for observer in self.search_observers:
            observer(time.perf_counter() - started)
        return matches

    async def refresh(self, servers: list[str]) -> None:
        await self.sync.refresh(servers)

    def backend_status(self, server: str) -> BackendStatus:
        return self.calls.backend(server).status()

    async def search(self, query: str, *, limit: int, server: str | None = None) -> list[Match]:
        """Search the whole catalog (the operator's dashboard); clients search through `view(request)`."""
        return await self._search_allowed(query, limit, server, None)

    @property
    def search_index_if_built(self) -> CatalogSearch | None:
        """The search index if something has searched (looking must not build it)."""
        return self._search

    async def notify_list_changed(self, kinds: set[Kind], caller: Caller | None = None) -> None:
        await self.back_channel.notify_list_changed(kinds, caller)

    async def notify_listeners(
        self, kinds: set[Kind], items: Mapping[Kind, frozenset[tuple[str, str]]] | None = None
    ) -> None:
        await self.back_channel.publish(kinds, items)

    @property
    def result_files(self) -> SpillStore:
        return self.spill

    def state_file(self, name: str) -> JsonStateFile:
        return JsonStateFile(self.data_dir / name)

    def worker_processes(self, module: str, most: int) -> WorkerProcesses:
        """Worker processes for a surface (code mode's engines), which it warms and closes."""
        return WorkerProcesses(module, most)

    def start_command(self, command: str, *, timeout: float) -> None:
        """Start an operator's command from the config through the shell; returns at once.

        It runs in the gateway's task group (stopped with the gateway) and is killed after `timeout`.
        The shell is deliberate: the command is the operator's own trusted config, and `a && b` or
        `$VAR` must work as they do in smart-mcp-proxy's `MCPPROXY_LIST_CHANGED_EXEC`.
        """
        if self._task_group is None:
            logger.warning("command %r not run: the gateway is not running", command)
            return
        self._task_group.start_soon(self._run_command, command, timeout)

    async def _run_command(self, command: str, timeout: float) -> None:
        try:
            code = await run_shell(command, timeout)
        except Exception as exc:  # it runs in the gateway's task group: a failure is this command's only
            logger.warning("command %r failed: %s", command, exc)
            return
        if code is None:
            logger.warning("command %r did not finish within %ss and was stopped", command, timeout)
        elif code:
            logger.warning("command %r exited with code %d", command, code)

    @property
    def instances(self) -> InstanceRegistry:
        if self._instances is None:
            from mcp_manifold._runtime.instances import InstanceRegistry

            self._instances = InstanceRegistry(
                self._settings,
                self.pool,
                self.health,
                self._catalog,
                self.back_channel,
                on_listing=self.pins.observe,
                on_forget=self._forget_instance,
            )
            if self.shared is not None:
                self._instances.shared = self.shared.instance_records()
        return self._instances

    def _forget_instance(self, instance_id: str, config: ServerConfig) -> None:
        """A hub instance whose id was generated is gone for good: its pins and its metric series go too, and
        what the replicas learned of it (learned.json's entry is the registry's to drop)."""
        if self.shared is not None and self.shared.learning is not None:
            self.shared.learning.forget(config)
        self.pins.forget(instance_id)
        self.pins.not_served(instance_id)
        for observer in self.forget_observers:
            observer(instance_id)

    def server_removed(self, name: str) -> None:
        """A config reload removed the server: what is kept by server goes (what it served, its metric series
        and their label), but not its pins. Else each server ever removed kept its series, and once
        `SERVER_LABELS` had been, every server added since counted as `_other`."""
        self.pins.not_served(name)
        for observer in self.forget_observers:
            observer(name)

    # --- client requests, routed to the surfaces (the front and the CLI call these) ----------------

    async def _needs_catalog(self, request: Request) -> None:
        if any(surface.needs_catalog for surface in self.surfaces):
            await self.ensure_catalog(request)
        for surface in self.surfaces:
            await surface.prepare_lists(request)

    async def ensure_catalog(self, request: Request | None = None) -> None:
        """List every server not listed yet; for a client, its own sessions' servers too."""
        await self.sync.ensure_catalog()
        if request is not None:
            await self.client_sessions.ensure_listed(list(self.config.servers.values()), request.caller)

    def _surfaces(self, request: Request) -> list[Surface]:
        """The surfaces this caller's profile may use (all of them without a profile)."""
        return [surface for surface in self.surfaces if self.access.allows_surface(request, surface.name)]

    def _owner(self, request: Request, kind: str, name: str) -> Surface | None:
        for surface in self._surfaces(request):
            owns = (
                surface.owns_tool(request, name)
                if kind == "tool"
                else surface.owns_resource(request, name)
                if kind == "resource"
                else surface.owns_prompt(request, name)
            )
            if owns:
                return surface
        return None

    async def _find_owner(self, request: Request, kind: str, name: str) -> Surface | None:
        surface = self._owner(request, kind, name)
        if surface is None:
            await self._needs_catalog(request)  # lazy servers may not be listed yet
            surface = self._owner(request, kind, name)
        return surface

    def list_freshness(self, request: Request) -> tuple[int, Literal["public", "private"]]:
        """How long a 2026-07-28 client may keep a list it got (`ttlMs`) and whether it may share it across
        authorization contexts (`cacheScope`).

        Fresh for a minute once every server has listed itself and none is failing (changes after that
        are announced on subscriptions/listen); immediately stale while the catalog is still filling in.
        Private when lists vary by caller: authentication or profiles (each caller sees its profile's, and a
        list must not be served to another access token), or servers with `session_scope: client`; else public.
        """
        ttl_ms = LIST_TTL_MS if self.sync.settled() else 0
        private = self.secured or any(server.session_scope == "client" for server in self.config.servers.values())
        return ttl_ms, "private" if private else "public"

    async def list_tools(self, request: Request) -> list[types.Tool]:
        await self._needs_catalog(request)
        self.back_channel.listed(request.caller, "tools")
        tools: dict[str, types.Tool] = {}
        for surface in self._surfaces(request):
            for tool in surface.list_tools(request):
                tools.setdefault(tool.name, tool)
        return list(tools.values())

    async def call_tool_by_name(self, request: Request, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """A client's `tools/call`: the surface that owns `name` answers; every failure is a tool error but a
        server's error that asks the client to act (`CLIENT_MUST_ACT`), which the client gets as sent.

        A name no surface owns is a tool error too, as a server answers for a tool it does not have (and
        the 2025-11-25 spec asks for input errors): it names the tool and suggests close ones, or carries a
        surface's advice (the hub's "connect to an instance first").
        """
        surface = await self._find_owner(request, "tool", name)
        if surface is None:
            view = self.view(request)
            view.report_miss(name)  # a tool that exists but is hidden from this caller: the audit says so
            hints = [hint for s in self._surfaces(request) if (hint := s.unknown_tool_hint(request, name))]
            if down := self.sync.not_running(name, self.settings.separator, view.may_use_server):
                return tool_error(f"tool {quoted(name)} is not available: {down}")  # not "unknown": say why
            unknown = f"unknown tool {quoted(name)}{for_profile(view.profile_name)}"
            if hints:
                return tool_error(f"{unknown}: {hints[0]}")
            known = [tool.name for tool in await self.list_tools(request)]
            return tool_error(f"{unknown}{did_you_mean(name, known)}")
        try:
            return await surface.call_tool(request, name, arguments)
        except BackendRequestError as exc:
            if exc.code in CLIENT_MUST_ACT:  # the server asks the client to act: an error, as the server sent it
                raise
            return tool_error(str(exc))
        except ManifoldError as exc:
            return tool_error(str(exc))

    async def list_resources(self, request: Request) -> list[types.Resource]:
        await self._needs_catalog(request)
        self.back_channel.listed(request.caller, "resources")
        return [resource for surface in self._surfaces(request) for resource in surface.list_resources(request)]

    async def list_resource_templates(self, request: Request) -> list[types.ResourceTemplate]:
        await self._needs_catalog(request)
        self.back_channel.listed(request.caller, "resources")
        surfaces = self._surfaces(request)
        return [template for surface in surfaces for template in surface.list_resource_templates(request)]

    async def read_resource_by_uri(self, request: Request, uri: str) -> types.ReadResourceResult:
        surface = await self._find_owner(request, "resource", uri)
        if surface is None:
            view = self.view(request)
            view.route_resource(uri)  # raises the unknown-resource error this caller may see (and records a refusal)
            raise unknown_resource(uri)
        return await surface.read_resource(request, uri)

    async def list_prompts(self, request: Request) -> list[types.Prompt]:
        await self._needs_catalog(request)
        self.back_channel.listed(request.caller, "prompts")
        return [prompt for surface in self._surfaces(request) for prompt in surface.list_prompts(request)]

    async def get_prompt_by_name(
        self, request: Request, name: str, arguments: dict[str, str] | None
    ) -> types.GetPromptResult:
        surface = await self._find_owner(request, "prompt", name)
        if surface is None:
            self.view(request).route_prompt(name)  # the unknown-prompt error this caller may see
            raise NotFound(f"unknown prompt {name!r}")
        return await surface.get_prompt(request, name, arguments)

    async def complete(
        self,
        request: Request,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context: dict[str, str] | None,
    ) -> types.CompleteResult:
        """A client's `completion/complete`: the surface that shows the prompt or template says where it lives."""
        target = self._completion_target(request, ref)
        if target is None:
            await self.sync.ensure_catalog()  # lazy servers may not be listed yet, whatever the surfaces show
            target = self._completion_target(request, ref)
        if target is None:
            what = (
                f"prompt {ref.name!r}" if isinstance(ref, types.PromptReference) else f"resource template {ref.uri!r}"
            )
            raise NotFound(f"unknown {what}: nothing to complete")
        return await self.calls.complete(request, target, ref, argument=argument, context=context)

    def _completion_target(
        self, request: Request, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> Target | None:
        surfaces = self._surfaces(request)
        return next((t for s in surfaces if (t := s.completion_target(request, ref)) is not None), None)

    async def subscribe(self, request: Request, uri: str) -> str:
        """Subscribe the client to a catalog resource; its server is told, and named in the return. Admitted
        by the policy as the gateway's own work is (kind "action": the principal's rate and calls in flight),
        since each one is a request to the server: before, a principal over its rate limit could still send
        them without end. Bounded per client (`back_channel.MAX_SUBSCRIPTIONS`, `MAX_SUBSCRIBED_URI`)."""
        await self._needs_catalog(request)
        route = self.view(request).route_resource(uri)
        self.back_channel.check_subscription(request.caller, uri)

        async def subscribe() -> None:
            backend = self.calls.backend(route.server)
            await backend.session()
            if backend.modern:
                self.back_channel.subscribe(request.caller, uri)
                # A 2026-07-28 server: its listen stream names them all, asked for when it is next opened.
                backend.listen_to(partial(self._subscribed_uris, route.server))
                return
            with no_deprecation_warnings():
                await backend.request("resources/subscribe", lambda session: session.subscribe_resource(route.original))
            self.back_channel.subscribe(request.caller, uri)

        await self.calls.action(request, Target(route.server, "resources/subscribe", uri, ""), subscribe)
        return route.server

    async def unsubscribe(self, request: Request, uri: str) -> None:
        if self.back_channel.unsubscribe(request.caller, uri):
            await self._unsubscribe_at_server(uri)

    def end_subscriptions(self, request: Request, uris: list[str]) -> None:
        """End the client's subscriptions to `uris` at once, telling their servers in the background: for a
        stream that ends by being cancelled (its client went away), where nothing may be awaited any more.
        Before, a 2026-07-28 listen stream's resources stayed subscribed at their servers for good."""
        released = [uri for uri in uris if self.back_channel.unsubscribe(request.caller, uri)]
        if released:
            self._release_subscriptions(released)

    def _release_subscriptions(self, uris: list[str]) -> None:
        """The last client subscribed to `uris` went away without unsubscribing: tell their servers, in the
        background (the client's session is closing)."""
        if self._task_group is None:
            return
        with suppress(RuntimeError):  # the gateway has stopped: its servers are stopping too
            self._task_group.start_soon(self._unsubscribe_at_servers, uris)

    async def _unsubscribe_at_servers(self, uris: list[str]) -> None:
        for uri in uris:
            try:
                await self._unsubscribe_at_server(uri, start=False)
            except Exception as exc:  # a server's odd failure must not end the gateway's task group
                logger.warning("could not unsubscribe %s: %s", uri, exc)

    async def _unsubscribe_at_server(self, uri: str, *, start: bool = True) -> None:
        """Tell the server of `uri` that no client is subscribed to it any more. Without `start`, a server
        that is not running is left alone: it holds no subscription, and starting it would be for nothing."""
        try:
            route = self._catalog.route_resource(uri)
            backend = self.calls.backend(route.server)
            if backend.modern:
                backend.listen_to(partial(self._subscribed_uris, route.server))
                return
            if not start and backend.state != "ready":
                return
            with no_deprecation_warnings():
                await backend.request(
                    "resources/unsubscribe", lambda session: session.unsubscribe_resource(route.original)
                )
        except ManifoldError as exc:
            logger.debug("could not unsubscribe %s: %s", uri, exc)

    def _subscribed_uris(self, server: str) -> set[str]:
        """The resources of `server` some client is subscribed to, as the server knows them."""
        subscribed = set()
        for uri in self.back_channel.subscribed():
            route = self._catalog.route_resource(uri)
            if route.server == server:
                subscribed.add(route.original)
        return subscribed

    async def set_logging_level(self, request: Request, level: types.LoggingLevel) -> None:
        """A session-era client's logging/setLevel: the level of what *it* is sent (each client its own).

        Servers are asked for the most verbose level any connected session-era client wants (one that set
        none wants every level), so that one client's `emergency` silences nothing another receives; the
        gateway drops, per client, what is below its level. A 2026-07-28 server has no logging/setLevel: it
        gets the level with each request instead, the calling client's own.

        Admitted by the policy as the gateway's own work (kind "action"): a change can be a request to every
        server, and before, a principal over its rate limit could alternate levels without end.
        """

        async def set_level() -> None:
            request.caller.log_level = level
            await self._ask_servers_log_level([level])

        await self.calls.action(request, Target("", "logging/setLevel", "logging/setLevel", ""), set_level)

    async def _ask_servers_log_level(self, more: list[types.LoggingLevel | None]) -> None:
        """Ask the running session-era servers for the most verbose level a connected client (or `more`)
        wants, when that changed since they were last asked."""
        wanted = most_verbose([client.log_level for client in self.back_channel.session_callers()] + more)
        if wanted == self._servers_log_level:
            return
        self._servers_log_level = wanted
        for backend in self.pool.all_backends():
            if backend.state == "ready" and not backend.modern:
                try:
                    with no_deprecation_warnings():
                        await backend.request("logging/setLevel", lambda session: session.set_logging_level(wanted))
                except ManifoldError as exc:
                    logger.debug("%s: logging/setLevel failed: %s", backend.name, exc)

    def fast_route(self, name: str, caller: Caller) -> Target | None:
        """Where a plain call of `name` can go by the fast lane, or None when it needs the surfaces first.

        Only a gateway that shows nothing but `direct` qualifies (other surfaces may own names per
        client), and only a running backend, with no spilling or result caching configured. A tool the
        caller may not see takes the normal path too, which answers it like an unknown name.
        """
        if len(self.surfaces) != 1 or self.surfaces[0].name != "direct" or self._settings.spill_threshold:
            return None
        request = Request(caller)
        entry = self.view(request).entry(name) if self.access.allows_surface(request, "direct") else None
        if entry is None:
            return None
        backend = self.pool.backends.get(entry.server)
        if backend is None or backend.state != "ready" or backend.config.cache_ttl:
            return None
        return Target(entry.server, entry.original.name, name, "direct")
