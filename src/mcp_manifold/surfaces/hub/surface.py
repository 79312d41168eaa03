"""The `hub` surface (seed 003, Brummer's hub): pick one running MCP server per client session.

Instances are the configured servers plus the servers found at run time in the discovery
directory (`instances.py`; `manifold register` writes those records). A client calls
`instances_list`, then `instances_connect(instance_id)`: from then on that session's tools,
resources and prompts include the instance's (a `list_changed` notification says so) and its
calls go there, with progress, logs and cancellation passed through. `instances_disconnect`
takes them away again. The binding lives in the client session's state and is released when
the session ends (client hang-up or `session_idle_timeout`), so two HTTP clients never see each
other's instance.

Each instance has one gateway-side connection (a `Backend`), shared by the sessions bound to it
and watched by the gateway's `HealthMonitor`: a dead instance gives its sessions a clear error
and a log message, and they pick up where they were when it comes back.
"""

from __future__ import annotations

import json
import logging
import re
import time
import warnings
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.exceptions import MCPDeprecationWarning

from mcp_manifold._errors import BackendUnavailable, InvalidRequest, ManifoldError, NotFound
from mcp_manifold.core.catalog import Kind
from mcp_manifold.runtime.discovery import InstanceRecord, discovery_dir, read_records, remove_record
from mcp_manifold.surfaces.base import CallContext, Surface

if TYPE_CHECKING:
    from mcp.server.connection import Connection

    from mcp_manifold.core.health import Health, HealthState
    from mcp_manifold.runtime.backends import Backend, BackendStatus
    from mcp_manifold.runtime.gateway import Gateway

logger = logging.getLogger(__name__)

LIST = "instances_list"
CONNECT = "instances_connect"
DISCONNECT = "instances_disconnect"
HUB_TOOL_NAMES = (LIST, CONNECT, DISCONNECT)
_BOUND = "hub.instance"  # session state: the id of the instance this session is connected to
_RELEASE = "hub.release_registered"
_DEFAULT_SCAN_INTERVAL = 10.0
_ALL_KINDS: set[Kind] = {"tools", "resources", "prompts"}
_HOW_TO = f"Call {LIST} to see the running instances, then {CONNECT} with an instance_id to use its tools."


def hub_tools() -> list[types.Tool]:
    no_arguments = {"type": "object", "properties": {}}
    return [
        types.Tool(
            name=LIST,
            description="List the MCP server instances this hub can connect you to: configured servers and "
            "servers found running, with their state (discovered, connecting, active, retrying, dead).",
            input_schema=no_arguments,
        ),
        types.Tool(
            name=CONNECT,
            description="Connect this session to one instance: its tools, resources and prompts are added to "
            "yours until you disconnect or connect to another.",
            input_schema={
                "type": "object",
                "properties": {"instance_id": {"type": "string", "description": f"An id from {LIST}."}},
                "required": ["instance_id"],
            },
        ),
        types.Tool(
            name=DISCONNECT,
            description="Disconnect this session from its instance; its tools leave your list.",
            input_schema=no_arguments,
        ),
    ]


@dataclass
class Listing:
    """What one instance offers, as last listed (hub tool names removed: the hub's own win)."""

    tools: dict[str, types.Tool] = field(default_factory=dict)
    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: dict[str, types.Prompt] = field(default_factory=dict)

    def owns_uri(self, uri: str) -> bool:
        return any(r.uri == uri for r in self.resources) or any(
            _template_regex(t.uri_template).fullmatch(uri) for t in self.templates
        )


@dataclass
class Instance:
    """One instance the hub knows: a discovered record or a configured server, and its connection."""

    id: str
    name: str
    backend: Backend
    record: InstanceRecord | None = None  # None for configured servers
    listing: Listing | None = None
    was_down: bool = False  # failed since it was last active: its recovery is worth telling

    @property
    def kind(self) -> str:
        return "configured" if self.record is None else "discovered"

    def label(self) -> str:
        return f"instance {self.name!r} ({self.id})" if self.name != self.id else f"instance {self.id!r}"


class HubSurface(Surface):
    name = "hub"
    needs_catalog = False  # its lists come from the connected instance, not the catalog

    def __init__(self, gateway: Gateway) -> None:
        super().__init__(gateway)
        self.directory = discovery_dir(gateway.settings.discovery_dir)
        self.instances: dict[str, Instance] = {}
        self._sessions: dict[str, weakref.WeakSet[Connection]] = {}  # instance id -> bound sessions
        self._gone: dict[str, str] = {}  # id of a dropped instance -> why, for the sessions still bound
        self._reported: set[tuple[str, str]] = set()  # malformed files already logged
        self._scan_lock = anyio.Lock()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._tools = hub_tools()

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        for backend in self.gateway.pool:
            if backend.state != "disabled":
                self.instances[backend.name] = Instance(id=backend.name, name=backend.name, backend=backend)
        self.gateway.health.subscribe(self._on_health_change)
        self.gateway.catalog.subscribe(self._on_catalog_change)

    async def run(self) -> None:
        """Poll the discovery directory until the gateway stops; own the discovered connections.

        Polling, not file-system events: staleness is a matter of time passing (a pid dies, a
        last_ping ages) that no event announces, so a periodic pass is needed anyway, and it
        works the same on every file system. `instances_list` and `instances_connect` also scan
        on demand, so a client never waits for the next pass.
        """
        interval = self.gateway.settings.ping_interval or _DEFAULT_SCAN_INTERVAL
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                while True:
                    try:
                        await self.scan()
                    except Exception:
                        logger.exception("scanning the discovery directory %s failed", self.directory)
                    await anyio.sleep(interval)
            finally:
                self._tasks = None
                with anyio.CancelScope(shield=True):
                    for instance in list(self.instances.values()):
                        if instance.record is not None:
                            await self.gateway.pool.remove(instance.id)

    # --- discovery -----------------------------------------------------------------------------

    async def scan(self) -> None:
        """Bring the discovered instances in line with the directory: add, update, drop stale."""
        if self._tasks is None:
            return  # not running (yet or any more)
        async with self._scan_lock:
            found = await anyio.to_thread.run_sync(read_records, self.directory)
            for source, problem in found.problems.items():
                self._report_once(source, f"skipping instance file {problem}")
            for instance_id, (_record, reason) in found.stale.items():
                logger.info("instance %s is stale (%s); removing its record", instance_id, reason)
                await anyio.to_thread.run_sync(remove_record, self.directory, instance_id)
            now = time.time()
            for instance in list(self.instances.values()):
                if instance.record is None or instance.id in found.live:
                    continue
                if f"{instance.id}.json" in found.problems and instance.record.stale_reason(now) is None:
                    # Unreadable just now (a writer that does not replace it atomically is mid-write):
                    # keep the instance on its last good record until that one goes stale.
                    continue
                stale = found.stale.get(instance.id)
                await self._drop(instance, f"stale: {stale[1]}" if stale else "its registration was removed")
            for record in found.live.values():
                await self._add_or_update(record)
            # Why an instance went away matters only to sessions still bound to it.
            for instance_id in [gone for gone in self._gone if not self._sessions.get(gone)]:
                del self._gone[instance_id]

    async def _add_or_update(self, record: InstanceRecord) -> None:
        current = self.instances.get(record.id)
        if current is not None and current.record is None:
            self._report_once(record.id, f"instance id {record.id!r} is a configured server's name; skipped")
            return
        if current is not None:
            assert current.record is not None
            if current.record.server_config().identity() == record.server_config().identity():
                current.record = record  # a fresher last_ping
                return
            await self._drop(current, "re-registered with a different address")
        if self._tasks is None:
            return  # shutting down
        try:
            backend = self.gateway.pool.add(record.server_config(), _InstanceHooks(self), self._tasks)
        except ValueError as exc:
            self._report_once(record.id, str(exc))
            return
        self.instances[record.id] = Instance(id=record.id, name=record.name, backend=backend, record=record)
        self._gone.pop(record.id, None)
        self.gateway.health.track(record.id)
        logger.info("discovered instance %s at %s", record.id, record.endpoint())
        if self._sessions.get(record.id):
            # Sessions still bound from before get their instance back.
            self._tasks.start_soon(self._reattach, self.instances[record.id])

    async def _drop(self, instance: Instance, reason: str) -> None:
        self.instances.pop(instance.id, None)
        self._gone[instance.id] = reason
        self.gateway.health.forget(instance.id)
        await self.gateway.pool.remove(instance.id)
        logger.info("dropped instance %s: %s", instance.id, reason)
        if self._sessions.get(instance.id):
            await self._notify_sessions(instance.id, "warning", f"{instance.label()} went away: {reason}")
            for connection in list(self._sessions[instance.id]):
                await self.gateway.notify_list_changed(_ALL_KINDS, connection)

    def _report_once(self, key: str, message: str) -> None:
        if len(self._reported) > 1000:  # bounded: a directory full of junk must not grow memory
            self._reported.clear()
        if (key, message) not in self._reported:
            self._reported.add((key, message))
            logger.warning("%s", message)

    # --- what the client sees ----------------------------------------------------------------

    def reserved_tool_names(self) -> list[str]:
        return list(HUB_TOOL_NAMES)

    def list_tools(self, call: CallContext) -> list[types.Tool]:
        listing = self._bound_listing(call)
        return [*self._tools, *(listing.tools.values() if listing else ())]

    def owns_tool(self, call: CallContext, name: str) -> bool:
        if name in HUB_TOOL_NAMES:
            return True
        listing = self._bound_listing(call)
        if listing is not None and name in listing.tools:
            return True
        # A name nobody else knows: answer it with how to connect rather than a bare "unknown tool".
        return not any(surface.owns_tool(call, name) for surface in self.gateway.surfaces if surface is not self)

    async def call_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if name == LIST:
            return await self._list_instances(call)
        if name == CONNECT:
            return await self._connect(call, arguments)
        if name == DISCONNECT:
            return await self._disconnect(call)
        listing = self._bound_listing(call)
        if listing is None or name not in listing.tools:
            return await self._unknown_tool(call, name, arguments)
        instance = await self._usable(call)
        result = await self.gateway.call_tool(call, instance.id, name, arguments)
        if instance.backend.state == "failed":
            # The connection died during the call: count it now, not at the next ping.
            self.gateway.health.report_failure(instance.id, instance.backend.last_error or "connection lost")
        return result

    def list_resources(self, call: CallContext) -> list[types.Resource]:
        listing = self._bound_listing(call)
        return list(listing.resources) if listing else []

    def list_resource_templates(self, call: CallContext) -> list[types.ResourceTemplate]:
        listing = self._bound_listing(call)
        return list(listing.templates) if listing else []

    def owns_resource(self, call: CallContext, uri: str) -> bool:
        listing = self._bound_listing(call)
        return listing is not None and listing.owns_uri(uri)

    async def read_resource(self, call: CallContext, uri: str) -> types.ReadResourceResult:
        instance = await self._usable(call)
        return await self.gateway.read_resource(call, instance.id, uri)

    def list_prompts(self, call: CallContext) -> list[types.Prompt]:
        listing = self._bound_listing(call)
        return list(listing.prompts.values()) if listing else []

    def owns_prompt(self, call: CallContext, name: str) -> bool:
        listing = self._bound_listing(call)
        return listing is not None and name in listing.prompts

    async def get_prompt(self, call: CallContext, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        instance = await self._usable(call)
        return await self.gateway.get_prompt(call, instance.id, name, arguments)

    # --- the hub's tools -----------------------------------------------------------------------

    async def _list_instances(self, call: CallContext) -> types.CallToolResult:
        await self.scan()
        bound = call.state.get(_BOUND)
        rows = [self._describe(instance, bound) for instance in self.instances.values()]
        if bound is not None and bound not in self.instances:
            rows.append({"id": bound, "state": "gone", "connected": True, "last_error": self._gone.get(bound)})
        text = json.dumps({"instances": rows, "connected": bound}, indent=1)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    def live_rows(self) -> list[dict[str, Any]]:
        """Every known instance as `instances_list` shows it, for `manifold servers` (live_status)."""
        return [self._describe(instance, None) for instance in self.instances.values()]

    def _describe(self, instance: Instance, bound: str | None) -> dict[str, Any]:
        health = self.gateway.health.health.get(instance.id)
        now = self.gateway.health.clock()
        row: dict[str, Any] = {
            "id": instance.id,
            "name": instance.name,
            "kind": instance.kind,
            "endpoint": _endpoint(instance),
            "state": _state(instance, health),
            "connected": instance.id == bound,
            "sessions": len(self._sessions.get(instance.id, ())),
        }
        if instance.listing is not None:
            row["tools"] = len(instance.listing.tools)
        last_error = (health.last_error if health else None) or (
            instance.backend.last_error if instance.backend.state == "failed" else None
        )
        if last_error:
            row["last_error"] = last_error
        retry_in = health.retry_in(now) if health else None
        if retry_in is not None:
            row["retry_in"] = round(retry_in, 1)
        if instance.record is not None:
            record = instance.record
            row.update(
                {
                    key: value
                    for key, value in (
                        ("directory", record.directory),
                        ("pid", record.pid),
                        ("started_at", record.started_at or None),
                        ("last_ping_age", round(max(0.0, time.time() - record.last_ping), 1)),
                    )
                    if value is not None
                }
            )
        return row

    async def _connect(self, call: CallContext, arguments: dict[str, Any]) -> types.CallToolResult:
        instance_id = arguments.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id.strip():
            raise InvalidRequest(f"{CONNECT} needs 'instance_id': a string id from {LIST}")
        instance_id = instance_id.strip()
        await self.scan()
        instance = self.instances.get(instance_id)
        if instance is None:
            known = ", ".join(sorted(self.instances)) or "none"
            raise NotFound(f"unknown instance {instance_id!r}; known instances: {known}. {LIST} shows them all.")
        await self._ensure_connected(instance)
        listing = await self._relist(instance)
        self._bind(call, instance.id)
        await self.gateway.notify_list_changed(_ALL_KINDS, call.connection)
        names = ", ".join(listing.tools) or "none"
        text = (
            f"Connected to {instance.label()}: {len(listing.tools)} tool(s) ({names}), "
            f"{len(listing.resources) + len(listing.templates)} resource(s), {len(listing.prompts)} prompt(s). "
            f"They are in your lists now; {DISCONNECT} removes them."
        )
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _disconnect(self, call: CallContext) -> types.CallToolResult:
        bound = call.state.get(_BOUND)
        if bound is None:
            text = "This session is not connected to an instance."
        else:
            self._unbind(call.connection)
            await self.gateway.notify_list_changed(_ALL_KINDS, call.connection)
            text = f"Disconnected from instance {bound!r}; its tools are no longer in your list."
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def _unknown_tool(self, call: CallContext, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        # The catalog may not be loaded yet: another surface may own the name after all.
        if any(surface.needs_catalog for surface in self.gateway.surfaces):
            await self.gateway.ensure_catalog()
        for surface in self.gateway.surfaces:
            if surface is not self and surface.owns_tool(call, name):
                return await surface.call_tool(call, name, arguments)
        bound = call.state.get(_BOUND)
        if bound is None:
            raise NotFound(f"unknown tool {name!r}: this session is not connected to an instance. {_HOW_TO}")
        if bound not in self.instances:
            raise NotFound(f"unknown tool {name!r}: {self._gone_message(bound)}")
        listing = self.instances[bound].listing
        tools = ", ".join(listing.tools) if listing else "unknown"
        raise NotFound(
            f"unknown tool {name!r}: {self.instances[bound].label()} has no such tool (its tools: {tools}). "
            f"{CONNECT} switches to another instance."
        )

    # --- sessions ----------------------------------------------------------------------------

    def _bound_listing(self, call: CallContext) -> Listing | None:
        instance = self.instances.get(call.state.get(_BOUND) or "")
        return instance.listing if instance is not None else None

    def _bind(self, call: CallContext, instance_id: str) -> None:
        connection = call.connection
        self._unbind(connection)
        connection.state[_BOUND] = instance_id
        self._sessions.setdefault(instance_id, weakref.WeakSet()).add(connection)
        if not connection.state.get(_RELEASE):
            # Runs when the client session ends (hang-up, DELETE or idle expiry).
            connection.exit_stack.callback(self._unbind, connection)
            connection.state[_RELEASE] = True

    def _unbind(self, connection: Connection) -> None:
        bound = connection.state.pop(_BOUND, None)
        if bound is not None and bound in self._sessions:
            self._sessions[bound].discard(connection)
            if not self._sessions[bound]:
                del self._sessions[bound]

    async def _usable(self, call: CallContext) -> Instance:
        """The session's instance, ready for a request, or a ManifoldError saying why not."""
        bound = call.state.get(_BOUND)
        if bound is None:
            raise NotFound(f"this session is not connected to an instance. {_HOW_TO}")
        instance = self.instances.get(bound)
        if instance is None:
            raise BackendUnavailable(bound, self._gone_message(bound))
        health = self.gateway.health.health.get(instance.id)
        if health is not None and health.state in ("retrying", "dead"):
            retry = health.retry_in(self.gateway.health.clock())
            # A due attempt is running now (a hung server can hold one for init_timeout): say so, not "in 0s".
            when = ""
            if retry is not None:
                when = f"; next reconnect attempt in {retry:.0f}s" if retry >= 0.5 else "; reconnecting now"
            raise BackendUnavailable(
                instance.id,
                f"{instance.label()} is {health.state} ({_reason(instance.id, health.last_error)}){when}. "
                "Calls work again once it "
                f"answers; {LIST} shows its state, {CONNECT} switches to another instance.",
            )
        await self._ensure_connected(instance)
        return instance

    def _gone_message(self, instance_id: str) -> str:
        reason = self._gone.get(instance_id, "it is no longer registered")
        return f"instance {instance_id!r} is gone ({reason}). {_HOW_TO}"

    async def _ensure_connected(self, instance: Instance) -> None:
        if instance.backend.state == "ready":
            return
        try:
            await self.gateway.health.connect(instance.backend)
        except TimeoutError:
            raise BackendUnavailable(instance.id, f"could not connect to {instance.label()}: timed out") from None
        except ManifoldError as exc:
            health = self.gateway.health.health.get(instance.id)
            state = f" (state {health.state})" if health else ""
            raise BackendUnavailable(
                instance.id,
                f"could not connect to {instance.label()}{state}: {_reason(instance.id, str(exc))}. "
                f"{LIST} shows every instance.",
            ) from None

    async def _relist(self, instance: Instance) -> Listing:
        """List the instance again; keeps the old listing if this one fails."""
        tools, resources, templates, prompts = await instance.backend.list_all()
        allowed = instance.backend.config.tools.allows
        listing = Listing(resources=resources, templates=templates, prompts={p.name: p for p in prompts})
        for tool in tools:
            if tool.name in HUB_TOOL_NAMES:
                self._report_once(instance.id, f"{instance.label()}: tool {tool.name!r} is hidden by the hub's own")
            elif allowed(tool.name):
                listing.tools[tool.name] = tool
        instance.listing = listing
        return listing

    async def _notify_sessions(
        self, instance_id: str, level: types.LoggingLevel, message: Any, logger_name: str = "manifold.hub"
    ) -> None:
        """Tell the sessions bound to an instance what happened to it (a log message, best effort)."""
        for connection in list(self._sessions.get(instance_id, ())):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await connection.log(level, message, logger=logger_name)
            except Exception as exc:
                logger.debug("could not tell a session about %s: %s", instance_id, exc)

    # --- events ------------------------------------------------------------------------------

    def _on_health_change(self, name: str, old: HealthState, new: HealthState, health: Health) -> None:
        instance = self.instances.get(name)
        if instance is None or self._tasks is None:
            return
        if new in ("retrying", "dead"):
            instance.was_down = True
        if new == "dead" and self._sessions.get(name):
            reason = _reason(name, health.last_error)
            message = f"{instance.label()} is dead: {reason}. The hub keeps trying to reconnect."
            self._tasks.start_soon(self._notify_sessions, name, "error", message)
        elif new == "active" and instance.was_down:
            instance.was_down = False
            self._tasks.start_soon(self._recovered, instance)

    async def _reattach(self, instance: Instance) -> None:
        try:
            await self._ensure_connected(instance)
        except ManifoldError:
            return  # the health monitor keeps trying; `_recovered` re-lists when it succeeds
        await self._notify_sessions(instance.id, "notice", f"{instance.label()} is back")
        await self.refresh_listing(instance)

    async def _recovered(self, instance: Instance) -> None:
        if not self._sessions.get(instance.id):
            return
        await self._notify_sessions(instance.id, "notice", f"{instance.label()} is back")
        await self.refresh_listing(instance)

    async def refresh_listing(self, instance: Instance) -> None:
        """Re-list an instance with sessions and tell them if anything changed."""
        before = instance.listing
        try:
            after = await self._relist(instance)
        except ManifoldError as exc:
            logger.warning("could not re-list %s: %s", instance.label(), exc)
            return
        if before != after:
            for connection in list(self._sessions.get(instance.id, ())):
                await self.gateway.notify_list_changed(_ALL_KINDS, connection)

    def _on_catalog_change(self, kinds: set[Any]) -> None:
        # A configured server's lists changed: re-list it for the sessions connected to it.
        if self._tasks is None:
            return
        for instance_id in list(self._sessions):
            instance = self.instances.get(instance_id)
            if instance is not None and instance.record is None and instance.backend.state == "ready":
                self._tasks.start_soon(self.refresh_listing, instance)


class _InstanceHooks:
    """What a discovered instance initiates goes to its sessions only, never to the catalog."""

    def __init__(self, hub: HubSurface) -> None:
        self.hub = hub

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        method = getattr(notification, "method", "")
        instance = self.hub.instances.get(backend.name)
        if instance is None or not method.endswith("/list_changed") or self.hub._tasks is None:
            return
        # Not inline: this runs on the backend's read loop, which must stay free to deliver the listing.
        self.hub._tasks.start_soon(self.hub.refresh_listing, instance)

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        if backend.current_caller is not None:
            await self.hub.gateway.on_server_log(backend, params)  # to the session whose call is running
            return
        name = f"{backend.name}.{params.logger}" if params.logger else backend.name
        await self.hub._notify_sessions(backend.name, params.level, params.data, name)

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        if backend.current_caller is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"no client call is waiting to answer {method}")
        return await self.hub.gateway.on_server_request(backend, method, params)


class _QuietHooks:
    """For short-lived probes: nothing the server initiates goes anywhere."""

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        return None

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        return None

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method} is not answered by a probe")


async def instance_statuses(gateway: Gateway) -> list[BackendStatus]:
    """Connect once to every live discovered instance and report it like a configured server.

    For `manifold servers`: empty unless the hub is exposed. The probes' connections are closed
    before this returns.
    """
    if "hub" not in gateway.settings.expose:
        return []
    found = await anyio.to_thread.run_sync(read_records, discovery_dir(gateway.settings.discovery_dir))
    records = [record for record in found.live.values() if record.id not in gateway.pool.backends]
    statuses: list[BackendStatus] = []
    async with anyio.create_task_group() as owners:
        # Probes get names of their own: this gateway's hub may be connecting to the same instances.
        backends = [
            gateway.pool.add(replace(record.server_config(), name=f"{record.id} (probe)"), _QuietHooks(), owners)
            for record in records
        ]
        try:
            async with anyio.create_task_group() as probes:
                for backend in backends:
                    probes.start_soon(_probe, backend)
            statuses = [
                replace(backend.status(), name=record.id) for record, backend in zip(records, backends, strict=True)
            ]
        finally:
            for backend in backends:
                await gateway.pool.remove(backend.name)
    return statuses


async def _probe(backend: Backend) -> None:
    try:
        await backend.list_all()
    except ManifoldError as exc:
        logger.debug("probe of %s failed: %s", backend.name, exc)


def _endpoint(instance: Instance) -> str:
    if instance.record is not None:
        return instance.record.endpoint()
    config = instance.backend.config
    return config.url or " ".join([config.command or "", *config.args]).strip()


def _state(instance: Instance, health: Health | None) -> str:
    if health is not None and health.state != "discovered":
        return health.state
    if instance.backend.state == "ready":
        return "active"
    if instance.backend.state == "starting":
        return "connecting"
    return "discovered"


def _reason(instance_id: str, error: str | None) -> str:
    """A backend error without its "server 'id': " prefix, for messages that already name the instance."""
    return (error or "unknown error").removeprefix(f"server {instance_id!r}: ")


def _template_regex(template: str) -> re.Pattern[str]:
    """A URI template (RFC 6570, the simple forms) as a pattern that matches its URIs."""
    pattern = ""
    for literal, expression in re.findall(r"([^{]*)(\{[^}]*\})?", template):
        pattern += re.escape(literal)
        if expression:
            # `{+var}` and `{#var}` may span slashes; `{var}` stays within one segment.
            pattern += ".*" if expression[1:2] in ("+", "#") else "[^/]*"
    return re.compile(pattern)
