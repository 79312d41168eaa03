"""Instances: MCP servers the gateway connects to at run time, for the hub surface (seed 003).

The registry knows the configured servers plus the servers found in the discovery directory
(`discovery.py`; `manifold register` writes those records). Each instance has one gateway-side
connection (a `Backend` added to the pool at run time), watched by the gateway's `HealthMonitor`,
and its last listing. What happens to an instance (it goes away, dies, comes back, lists something
else, logs outside any call) is told to the registry's listener, the hub surface, which decides what
its clients hear of it. The registry knows nothing of clients.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import mcp_types as types

from mcp_manifold._core.health import Health, HealthState
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.naming import assign_names
from mcp_manifold._core.status import BackendStatus
from mcp_manifold._errors import BackendUnavailable, ManifoldError
from mcp_manifold._runtime.discovery import InstanceRecord, Scan, discovery_dir, read_records, remove_record
from mcp_manifold._runtime.learned import learned_facts

if TYPE_CHECKING:
    from mcp_manifold._config import ServerConfig, Settings
    from mcp_manifold._core.catalog import Catalog
    from mcp_manifold._runtime.back_channel import BackChannel
    from mcp_manifold._runtime.backends import Backend
    from mcp_manifold._runtime.health import HealthMonitor
    from mcp_manifold._runtime.pool import BackendPool

logger = logging.getLogger(__name__)

_DEFAULT_SCAN_INTERVAL = 10.0


class InstanceListener(Protocol):
    """What the registry tells (the hub surface); every method is called in the registry's task group."""

    def in_use(self, instance_id: str) -> bool:
        """Whether any client is connected to the instance (only those instances are worth news)."""
        ...

    async def instance_gone(self, instance_id: str, label: str, reason: str, listing: Listing | None) -> None:
        """The instance went away; `listing`: what it last listed (all of it left the lists)."""
        ...

    async def instance_dead(self, instance_id: str, label: str, reason: str) -> None: ...

    async def instance_back(self, instance_id: str, label: str) -> None: ...

    async def listing_changed(self, instance_id: str, before: Listing | None) -> None:
        """The instance lists something else than `before` now (its `listing`)."""
        ...

    async def instance_log(self, instance_id: str, level: types.LoggingLevel, data: Any, logger_name: str) -> None: ...


@dataclass
class Instance:
    """One instance the registry knows: a discovered record or a configured server, and its connection."""

    id: str
    name: str
    backend: Backend
    record: InstanceRecord | None = None  # None for configured servers
    listing: Listing | None = None  # with the names clients see (valid names, as `direct` makes them)
    was_down: bool = False  # failed since it was last active: its recovery is worth telling
    connected_at: float | None = None  # Unix time the gateway's connection to it last came up
    tool_names: dict[str, str] = field(default_factory=dict)  # exposed -> the instance's own name
    prompt_names: dict[str, str] = field(default_factory=dict)

    def original_tool(self, exposed: str) -> str:
        return self.tool_names.get(exposed, exposed)

    def original_prompt(self, exposed: str) -> str:
        return self.prompt_names.get(exposed, exposed)

    @property
    def kind(self) -> str:
        return "configured" if self.record is None else "discovered"

    def label(self) -> str:
        return f"instance {self.name!r} ({self.id})" if self.name != self.id else f"instance {self.id!r}"

    def endpoint(self) -> str:
        """Where the instance is, as listings show it: redacted like every view of a server's config."""
        return self.backend.config.endpoint()


class SharedRecords(Protocol):
    async def merged(self, local: Scan) -> Scan:
        """`local` (this replica's directory) published, with the live records of every replica added."""
        ...


class InstanceRegistry:
    """The instances of one gateway: discovery, connections, health and listings."""

    def __init__(
        self,
        settings: Settings,
        pool: BackendPool,
        health: HealthMonitor,
        catalog: Catalog,
        back_channel: BackChannel,
        on_listing: Callable[[str, Listing], object] | None = None,
        on_forget: Callable[[str, ServerConfig], object] | None = None,
    ) -> None:
        self.settings = settings
        self.on_listing = on_listing  # sees each listing before clients do (the pins)
        self.on_forget = on_forget  # told each instance gone for good, and how it was reached (the pins forget it)
        self.pool = pool
        self.health_monitor = health
        self.catalog = catalog
        self.back_channel = back_channel
        self.directory = discovery_dir(settings.discovery_dir)
        self.instances: dict[str, Instance] = {}
        self.gone: dict[str, str] = {}  # id of a dropped instance -> why, while a client still uses it
        self.skipped: set[str] = set()  # live records left out at the last scan: hub_max_instances reached
        self._listener: InstanceListener | None = None
        self._reserved: frozenset[str] = frozenset()  # tool names instances may not use (the hub's own)
        self._reported: set[tuple[str, str]] = set()  # problems already logged
        self._scan_lock = anyio.Lock()
        self._relisting: dict[str, bool] = {}  # instance being re-listed on its announcement -> announced again
        self._tasks: anyio.abc.TaskGroup | None = None
        # Replicas sharing state: the records in the store too, and this directory's published there.
        self.shared: SharedRecords | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self, listener: InstanceListener) -> None:
        """Know the configured servers as instances, and start telling `listener` what happens."""
        self._listener = listener
        for backend in self.pool:
            if backend.state != "disabled":
                self.instances[backend.name] = Instance(id=backend.name, name=backend.name, backend=backend)
        self.health_monitor.subscribe(self._on_health_change)
        self.catalog.subscribe(self._on_catalog_change)

    async def run(self) -> None:
        """Poll the discovery directory until the gateway stops; own the discovered connections.

        Polling, not file-system events: staleness is a matter of time passing (a pid dies, a
        last_ping ages) that no event announces, so a periodic pass is needed anyway, and it
        works the same on every file system. Clients' `instances_list` and `instances_connect` also
        scan on demand, so a client never waits for the next pass.
        """
        interval = self.settings.ping_interval or _DEFAULT_SCAN_INTERVAL
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
                            await self.pool.remove(instance.id)

    # --- discovery -------------------------------------------------------------------------------

    async def scan(self) -> None:
        """Bring the discovered instances in line with the directory: add, update, drop stale."""
        if self._tasks is None:
            return  # not running (yet or any more)
        async with self._scan_lock:
            found = await anyio.to_thread.run_sync(read_records, self.directory)
            if self.shared is not None and found.refused is None:
                found = await self.shared.merged(found)
            if found.refused is not None:
                # Anyone who can write there could make the hub start their command: read nothing.
                self._report_once(str(self.directory), refusal(self.directory, found.refused))
                for instance in [i for i in self.instances.values() if i.record is not None]:
                    await self._drop(instance, "the discovery directory is not trusted any more")
                return
            for source, problem in found.problems.items():
                self._report_once(source, f"skipping instance file {problem}")
            gone_for_good: dict[str, ServerConfig] = {}  # how each was reached (what was learned of it is keyed so)
            for instance_id, (record, reason) in found.stale.items():
                logger.info("instance %s is stale (%s); removing its record", instance_id, reason)
                await anyio.to_thread.run_sync(remove_record, self.directory, instance_id)
                if record.generated_id:  # stale before this gateway knew it (it was stopped, say)
                    gone_for_good[instance_id] = record.server_config()
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
                if instance.record.generated_id:
                    gone_for_good[instance.id] = instance.backend.config
            # A configured server's name is never an instance's (its record is skipped): its pins stay.
            for instance_id in gone_for_good.keys() - found.live.keys() - self.pool.backends.keys():
                self._forget(instance_id, gone_for_good[instance_id])
            self.skipped = set()
            for record in found.live.values():
                await self._add_or_update(record)
            # Why an instance went away matters only while a client is still connected to it.
            for instance_id in [gone for gone in self.gone if not self._in_use(gone)]:
                del self.gone[instance_id]

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
        limit = self.settings.hub_max_instances
        if sum(1 for known in self.instances.values() if known.record is not None) >= limit:
            self.skipped.add(record.id)
            self._report_once(
                "hub_max_instances",
                f"the hub keeps at most {limit} discovered instances "
                f"(hub_max_instances); skipping {record.id} and any further ones",
            )
            return
        try:
            backend = self.pool.add(record.server_config(), _InstanceHooks(self), self._tasks)
        except ValueError as exc:
            self._report_once(record.id, str(exc))
            return
        instance = Instance(id=record.id, name=record.name, backend=backend, record=record)
        self.instances[record.id] = instance
        self.gone.pop(record.id, None)
        self.health_monitor.track(record.id)
        logger.info("discovered instance %s at %s", record.id, record.endpoint())
        if self._in_use(record.id):
            # Clients still connected from before get their instance back.
            self._tasks.start_soon(self._reattach, instance)

    async def _drop(self, instance: Instance, reason: str) -> None:
        self.instances.pop(instance.id, None)
        self.gone[instance.id] = reason
        self.health_monitor.forget(instance.id)
        await self.pool.remove(instance.id)
        logger.info("dropped instance %s: %s", instance.id, reason)
        if self._listener is not None and self._in_use(instance.id):
            await self._listener.instance_gone(instance.id, instance.label(), reason, instance.listing)

    def _forget(self, instance_id: str, config: ServerConfig) -> None:
        """An instance whose id `manifold register` generated is gone: no registration names that id again, so
        what is kept for it goes too (its pins, metric series, and what was learned of how to reach it: one entry
        of learned.json per such instance was kept for good). An id given by the user (`--id`) keeps its pins: it
        may come back, and its tools are judged against them then."""
        logger.info("instance %s was registered under a generated id; forgetting its pins", instance_id)
        learned_facts(self.settings.data_dir).forget(config)
        if self.on_forget is not None:
            self.on_forget(instance_id, config)

    def _report_once(self, key: str, message: str) -> None:
        if len(self._reported) > 1000:  # bounded: a directory full of junk must not grow memory
            self._reported.clear()
        if (key, message) not in self._reported:
            self._reported.add((key, message))
            logger.warning("%s", message)

    # --- what the hub asks -----------------------------------------------------------------------

    def get(self, instance_id: str) -> Instance | None:
        return self.instances.get(instance_id)

    def health(self, instance_id: str) -> Health | None:
        return self.health_monitor.health.get(instance_id)

    def state(self, instance: Instance) -> str:
        """`discovered`, `connecting`, `active`, `retrying` or `dead`."""
        health = self.health(instance.id)
        if health is not None and health.state != "discovered":
            return health.state
        if instance.backend.state == "ready":
            return "active"
        if instance.backend.state == "starting":
            return "connecting"
        return "discovered"

    def unusable(self, instance: Instance) -> str | None:
        """Why calls to `instance` are refused right now (it is retrying or dead), or None."""
        health = self.health(instance.id)
        if health is None or health.state not in ("retrying", "dead"):
            return None
        retry = health.retry_in(self.health_monitor.clock())
        # A due attempt is running now (a hung server can hold one for init_timeout): say so, not "in 0s".
        when = ""
        if retry is not None:
            when = f"; next reconnect attempt in {retry:.0f}s" if retry >= 0.5 else "; reconnecting now"
        return f"{instance.label()} is {health.state} ({_reason(instance.id, health.last_error)}){when}"

    async def connect(self, instance: Instance) -> None:
        """Make sure the instance's connection is up; `BackendUnavailable` says why it is not."""
        if instance.backend.state == "ready":
            if instance.connected_at is None:  # started by someone else (a configured server's catalog)
                instance.connected_at = time.time()
            return
        try:
            await self.health_monitor.connect(instance.backend)
            instance.connected_at = time.time()
        except TimeoutError:
            raise BackendUnavailable(instance.id, f"could not connect to {instance.label()}: timed out") from None
        except ManifoldError as exc:
            health = self.health(instance.id)
            state = f" (state {health.state})" if health else ""
            raise BackendUnavailable(
                instance.id, f"could not connect to {instance.label()}{state}: {_reason(instance.id, str(exc))}"
            ) from None

    async def relist(self, instance: Instance) -> Listing:
        """List the instance again (hub tool names left out); keeps the old listing if this one fails. The listener
        hears of a change (`listing_changed`) whoever asked: before, a re-listing the hub forced (`instances_connect`)
        replaced the lists of the sessions bound to it, and of its address's listen streams, without telling them."""
        before = instance.listing
        listing = await instance.backend.list_all()
        allowed = instance.backend.config.tools.allows
        tools = []
        for tool in listing.tools:
            if tool.name in self._reserved:
                self._report_once(instance.id, f"{instance.label()}: tool {tool.name!r} is hidden by the hub's own")
            elif allowed(tool.name):
                tools.append(tool)
        if self.on_listing is not None:  # the pins judge the instance's own names
            self.on_listing(instance.id, replace(listing, tools=tools))
        # Valid, reversible names by `direct`'s rule, unprefixed (a session talks to one instance):
        # `scripts/list` is shown as `scripts_list` and called back under its own name.
        separator = self.settings.separator
        tool_names = assign_names((("", tool.name) for tool in tools), separator, self._reserved)
        prompt_names = assign_names((("", prompt.name) for prompt in listing.prompts), separator)
        instance.tool_names = {exposed: original for (_, original), exposed in tool_names.items()}
        instance.prompt_names = {exposed: original for (_, original), exposed in prompt_names.items()}
        instance.listing = replace(
            listing,
            tools=[tool.model_copy(update={"name": tool_names[("", tool.name)]}) for tool in tools],
            prompts=[prompt.model_copy(update={"name": prompt_names[("", prompt.name)]}) for prompt in listing.prompts],
        )
        if before != instance.listing and self._listener is not None:
            await self._listener.listing_changed(instance.id, before)
        return instance.listing

    def reserve(self, names: list[str]) -> None:
        """Tool names instances may not use (the hub's own, which win)."""
        self._reserved = frozenset(names)

    def after_call(self, instance: Instance) -> None:
        """A call ended: a connection that died during it counts now, not at the next ping."""
        if instance.backend.state == "failed":
            self.health_monitor.report_failure(instance.id, instance.backend.last_error or "connection lost")

    def row(self, instance: Instance) -> dict[str, Any]:
        """The instance as `instances_list` and `manifold servers` show it."""
        health = self.health(instance.id)
        now = self.health_monitor.clock()
        row: dict[str, Any] = {
            "id": instance.id,
            "name": instance.name,
            "kind": instance.kind,
            "endpoint": instance.endpoint(),
            "state": self.state(instance),
        }
        row["connected_at"] = instance.connected_at  # null until the gateway has connected to it
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

    # --- events ----------------------------------------------------------------------------------

    def _in_use(self, instance_id: str) -> bool:
        return self._listener is not None and self._listener.in_use(instance_id)

    def _on_health_change(self, name: str, old: HealthState, new: HealthState, health: Health) -> None:
        instance = self.instances.get(name)
        if instance is None or self._tasks is None or self._listener is None:
            return
        if new in ("retrying", "dead"):
            instance.was_down = True
            instance.connected_at = None
        elif new == "active" and instance.connected_at is None:
            instance.connected_at = time.time()
        if new == "dead" and self._in_use(name):
            self._tasks.start_soon(
                self._listener.instance_dead, name, instance.label(), _reason(name, health.last_error)
            )
        elif new == "active" and instance.was_down:
            instance.was_down = False
            if self._in_use(name):
                self._tasks.start_soon(self._recovered, instance)

    async def _reattach(self, instance: Instance) -> None:
        try:
            await self.connect(instance)
        except ManifoldError:
            return  # the health monitor keeps trying; `_recovered` re-lists when it succeeds
        await self._recovered(instance)

    async def _recovered(self, instance: Instance) -> None:
        if self._listener is not None:
            await self._listener.instance_back(instance.id, instance.label())
        await self.refresh_listing(instance)

    async def refresh_listing(self, instance: Instance) -> None:
        """Re-list an instance in use (`relist` tells the listener if anything changed)."""
        try:
            await self.relist(instance)
        except ManifoldError as exc:
            logger.warning("could not re-list %s: %s", instance.label(), exc)

    def relist_announced(self, instance: Instance) -> None:
        """The instance announced a list change: re-list it, once more at most after the re-list running now.
        An instance that announces without end (thousands in one call) costs two listings, not one each."""
        if self._tasks is None:
            return
        if instance.id in self._relisting:
            self._relisting[instance.id] = True
            return
        self._relisting[instance.id] = False
        self._tasks.start_soon(self._relist_while_announced, instance)

    async def _relist_while_announced(self, instance: Instance) -> None:
        try:
            while True:
                await self.refresh_listing(instance)
                if not self._relisting.get(instance.id):
                    return
                self._relisting[instance.id] = False
        finally:
            self._relisting.pop(instance.id, None)

    def _on_catalog_change(self, kinds: set[Any]) -> None:
        # A configured server's lists changed: re-list it for the clients connected to it.
        if self._tasks is None:
            return
        for instance in list(self.instances.values()):
            if instance.record is None and instance.backend.state == "ready" and self._in_use(instance.id):
                self._tasks.start_soon(self.refresh_listing, instance)


class _InstanceHooks:
    """What a discovered instance initiates goes to the clients using it, never to the catalog."""

    def __init__(self, registry: InstanceRegistry) -> None:
        self.registry = registry

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        method = getattr(notification, "method", "")
        instance = self.registry.instances.get(backend.name)
        if instance is None or not method.endswith("/list_changed"):
            return
        # Not inline: this runs on the backend's read loop, which must stay free to deliver the listing.
        self.registry.relist_announced(instance)

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        if backend.current_caller is not None:
            await self.registry.back_channel.on_server_log(backend, params)  # to the client of the call
            return
        listener = self.registry._listener
        if listener is not None:
            name = f"{backend.name}.{params.logger}" if params.logger else backend.name
            await listener.instance_log(backend.name, params.level, params.data, name)

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        if backend.current_caller is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"no client call is waiting to answer {method}")
        return await self.registry.back_channel.on_server_request(backend, method, params)


class _QuietHooks:
    """For short-lived probes: nothing the server initiates goes anywhere."""

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        return None

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        return None

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method} is not answered by a probe")


async def instance_statuses(settings: Settings, pool: BackendPool) -> list[BackendStatus]:
    """Connect once to every live discovered instance and report it like a configured server.

    For `manifold servers`: empty unless the hub is exposed. The probes' connections are closed
    before this returns.
    """
    if "hub" not in settings.expose:
        return []
    directory = discovery_dir(settings.discovery_dir)
    found = await anyio.to_thread.run_sync(read_records, directory)
    if found.refused is not None:
        logger.warning("%s", refusal(directory, found.refused))
    records = [record for record in found.live.values() if record.id not in pool.backends]
    statuses: list[BackendStatus] = []
    async with anyio.create_task_group() as owners:
        # Probes get names of their own: this gateway's hub may be connecting to the same instances.
        backends = [
            pool.add(replace(record.server_config(), name=f"{record.id} (probe)"), _QuietHooks(), owners)
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
                await pool.remove(backend.name)
    return statuses


async def _probe(backend: Backend) -> None:
    try:
        await backend.list_all()
    except ManifoldError as exc:
        logger.debug("probe of %s failed: %s", backend.name, exc)


def refusal(directory: Path, reason: str) -> str:
    """The log line for a discovery directory the hub will not read."""
    return (
        f"refusing the discovery directory {directory}: {reason}; no instance is read from it. "
        f"Use a directory only this user can write (chmod 700, owned by this user) or set discovery_dir."
    )


def _reason(instance_id: str, error: str | None) -> str:
    """A backend error without its "server 'id': " prefix, for messages that already name the instance."""
    return (error or "unknown error").removeprefix(f"server {instance_id!r}: ")
