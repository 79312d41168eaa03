"""Config reload: a serving gateway reads its config file again and applies the edit while it runs.

Triggers: the file changes on disk (`watchfiles`, when the `reload` setting is on), or `request()`
(SIGHUP on the HTTP front, see `_front/signals.py`). Every reload goes through the same loader and
checks as `manifold config check` (`load_config`); a config with problems is refused whole, with a
log line naming each problem, and the running config keeps serving.

A valid edit is applied at once (nothing awaits in between, so no call sees half of it):

- servers added are started (listed now if the catalog is in use or they are not lazy);
- servers removed stop once their calls in flight finish (at most `shutdown_timeout`);
- servers whose entry reaches another server (command, args, env, URL, headers...), or that were
  enabled or disabled, restart the same way; their tools stay listed until the new one lists;
- servers with other changes (prefix, tool filter, timeout, ...) keep their process and session;
- settings marked live change at once; the others are logged as needing a restart and keep their
  running value;
- the `profiles` section applies at once (it is read at each request), and clients are told their
  lists changed; so does the `auth` section (keys, tokens, operators: checked at each request),
  unless it switches authentication on or off or changes the OAuth metadata the front serves: then
  it is logged as needing a restart, as `port` is, and the running OAuth settings stay, though its API
  keys and operators apply at once (a key taken out is revoked: `auth_after`).

Clients learn what changed from the catalog's change events (`list_changed`, and the listen streams
of 2026-era clients), as for any other change of a backend's listing.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc

from mcp_manifold._config import Config, Settings, load_config
from mcp_manifold._config.changes import ConfigChanges, auth_after, diff_configs
from mcp_manifold._config.warnings import config_warnings
from mcp_manifold._errors import ConfigError
from mcp_manifold._runtime.heap import reloaded

if TYPE_CHECKING:
    from mcp_manifold._core.result_cache import ResultCache
    from mcp_manifold._runtime.back_channel import BackChannel
    from mcp_manifold._runtime.catalog_sync import CatalogSync
    from mcp_manifold._runtime.client_sessions import ClientSessions
    from mcp_manifold._runtime.health import HealthMonitor
    from mcp_manifold._runtime.pool import BackendPool

logger = logging.getLogger(__name__)

Trigger = Literal["file", "signal", "request"]
_DEBOUNCE_MS = 200  # an editor's save is often several writes (or a write and a rename)


class Reloadable(Protocol):
    """The parts of a running gateway a reload changes (the `Gateway` is one)."""

    config: Config
    pool: BackendPool
    client_sessions: ClientSessions
    sync: CatalogSync
    health: HealthMonitor
    result_cache: ResultCache
    back_channel: BackChannel

    @property
    def settings(self) -> Settings: ...

    @property
    def task_group(self) -> anyio.abc.TaskGroup: ...

    def server_removed(self, name: str) -> None: ...


@dataclass(frozen=True)
class ReloadOutcome:
    """One reload attempt: applied (with its changes) or refused (with the problems)."""

    at: float  # time.time()
    trigger: Trigger
    applied: bool
    changes: ConfigChanges = field(default_factory=ConfigChanges)
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "trigger": self.trigger,
            "applied": self.applied,
            "changes": self.changes.as_dict(),
            "problems": list(self.problems),
        }


class ConfigReloader:
    """Watches one gateway's config file and applies its edits; runs in the gateway's task group."""

    def __init__(self, gateway: Reloadable, *, watch: bool) -> None:
        assert gateway.config.path is not None, "only a config read from a file can be reloaded"
        self.gateway = gateway
        self.path: Path = gateway.config.path
        self.watch = watch
        self.history: deque[ReloadOutcome] = deque(maxlen=20)
        self.applied = 0  # reloads since start, by result (metrics)
        self.refused = 0
        self._lock = anyio.Lock()
        self._requested: Trigger | None = None
        self._wake = anyio.Event()
        self._stop_watching = anyio.Event()

    @property
    def last(self) -> ReloadOutcome | None:
        return self.history[-1] if self.history else None

    def request(self, trigger: Trigger = "request") -> None:
        """Ask for a reload soon (from a signal handler or any other code on the event loop)."""
        self._requested = trigger
        self._wake.set()

    def stop_watching(self) -> None:
        """Let the file watcher's thread end now; called as the gateway stops (its cancel alone would wait
        for the watcher's next timeout)."""
        self._stop_watching.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Apply requested reloads one at a time, and watch the file if asked to, until cancelled."""
        async with anyio.create_task_group() as task_group:
            if self.watch:
                task_group.start_soon(self._watch_file)
            task_status.started()
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                trigger, self._requested = self._requested or "request", None
                try:
                    await self.reload(trigger)
                except Exception:  # a bug in applying must not take the serving gateway down with it
                    logger.exception("config reload from %s failed", self.path)

    async def _watch_file(self) -> None:
        try:
            await self._watch()
        except Exception as exc:  # a folder that cannot be watched: serve on, SIGHUP still reloads
            logger.warning("cannot watch %s for changes (%s); edits apply on SIGHUP only", self.path, exc)

    async def _watch(self) -> None:
        from watchfiles import awatch  # its Rust extension loads only for a gateway that watches

        target = self.path.expanduser().absolute()

        def is_ours(_change: object, path: str) -> bool:
            return Path(path) == target

        # The folder, not the file: editors save by writing a new file and renaming it over the old one.
        async for _changes in awatch(
            target.parent,
            watch_filter=is_ours,
            debounce=_DEBOUNCE_MS,
            recursive=False,
            stop_event=self._stop_watching,
            rust_timeout=1000,
        ):
            if target.exists():  # removed (or half-way through a rename): wait for it to come back
                self.request("file")

    async def reload(self, trigger: Trigger = "request") -> ReloadOutcome:
        """Read the config file again and apply it; returns (and remembers) what happened."""
        async with self._lock:
            running = self.gateway.config
            try:
                # The same loader, checks and command-line flags as at start-up and `manifold config check`.
                loaded = load_config(self.path, overrides=running.overrides)
            except ConfigError as exc:
                outcome = self._refuse(trigger, tuple(str(problem) for problem in exc.problems))
            else:
                outcome = self._apply(trigger, running, loaded)
            self.history.append(outcome)
            return outcome

    def _refuse(self, trigger: Trigger, problems: tuple[str, ...]) -> ReloadOutcome:
        logger.error("config reload refused, %s still serves as before: %s", self.path, "; ".join(problems))
        self.refused += 1
        return ReloadOutcome(time.time(), trigger, applied=False, problems=problems)

    def _apply(self, trigger: Trigger, running: Config, loaded: Config) -> ReloadOutcome:
        changes = diff_configs(running, loaded)
        apply_changes(self.gateway, loaded, changes)
        for name, value, wanted in changes.needs_restart:
            logger.warning(
                "config reload: setting %s changed to %r but cannot change while running; "
                "it stays %r until the gateway restarts",
                name,
                wanted,
                value,
            )
        if changes.sections_need_restart:
            logger.warning(
                "config reload: the auth section switches authentication on or off, or changes the OAuth metadata "
                "the gateway serves, which waits for a restart; until then the running OAuth settings stay, and "
                "its api_keys, operators and revoked apply now (a key taken out is refused from the next request on)"
            )
        warned = set(config_warnings(running))  # said at start or at an earlier reload
        for warning in config_warnings(loaded):
            if warning not in warned:
                logger.warning("config reload: %s: %s", self.path, warning)
        logger.info("config reloaded from %s: %s", self.path, changes.summary())
        reloaded(self.gateway.settings.shutdown_timeout)  # what the old config held is the collector's to free
        self.applied += 1
        return ReloadOutcome(time.time(), trigger, applied=True, changes=changes)


def apply_changes(gateway: Reloadable, loaded: Config, changes: ConfigChanges) -> None:
    """Make the running gateway serve `loaded` (see the module docstring); nothing here awaits."""
    settings = gateway.settings
    for name, _old, new in changes.settings:
        setattr(settings, name, new)  # every part of the gateway holds this one Settings object
    if any(name.startswith("breaker_") for name, _old, _new in changes.settings):
        for backend in gateway.pool.all_backends():
            backend.breaker.threshold = max(1, settings.breaker_threshold)
            backend.breaker.cooldown = max(0.0, settings.breaker_cooldown)
    if any(name == "log_level" for name, _old, _new in changes.settings):
        logging.getLogger("mcp_manifold").setLevel(settings.log_level.upper())

    running = gateway.config
    fresh = set(changes.added) | set(changes.restarted)
    in_use = bool(gateway.sync.listed)
    was_listed = {name for name in changes.restarted if name in gateway.sync.listed}
    gone = gateway.pool.replace(list(loaded.servers.values()), fresh)
    for name in changes.reconfigured:
        gateway.pool[name].reconfigure(loaded.servers[name])
    # All of the loaded config (servers, profiles, auth) but the one Settings object everything holds; of
    # an `auth` that cannot change live (`diff_configs`), only the keys and operators. The HTTP front reads
    # it at each request (`_front/auth.py`), so a removed API key is refused from the next request on.
    auth = auth_after(running.auth, loaded.auth)
    gateway.config = replace(loaded, settings=settings, auth=auth, path=running.path, overrides=running.overrides)
    gateway.result_cache.configure(loaded.servers, restarted=frozenset(changes.restarted))
    for name in (*changes.removed, *changes.restarted):
        gateway.health.forget(name)
    for name in (*changes.restarted, *changes.reconfigured):
        gateway.sync.unsettle(name)  # list results carry a short ttl until the new listing is in
    for name in (*changes.removed, *changes.restarted, *changes.reconfigured):
        gateway.client_sessions.close_server(name, "the config changed")
    for name in changes.removed:
        gateway.sync.forget(name)
        gateway.server_removed(name)

    background = gateway.task_group
    if "profiles" in changes.sections:  # what each client may see changed, though no server's listing did
        background.start_soon(gateway.back_channel.notify_list_changed, {"tools", "resources", "prompts"})
    for backend in gone:
        background.start_soon(gateway.pool.retire, backend, settings.shutdown_timeout)
    relist = [name for name in changes.reconfigured if name in gateway.sync.listed]
    for name in changes.restarted:
        backend = gateway.pool[name]
        if backend.state == "disabled":
            gateway.sync.forget(name)
        elif name in was_listed or in_use or not backend.lazy:
            relist.append(name)
    relist += [name for name in changes.added if (in_use or not gateway.pool[name].lazy)]
    relist += [  # `lazy` turned off: every server not listed yet starts now, as at start-up
        backend.name
        for backend in gateway.pool
        if not backend.lazy and backend.state == "stopped" and backend.name not in gateway.sync.listed
    ]
    for name in dict.fromkeys(relist):
        if gateway.pool[name].state != "disabled":
            background.start_soon(gateway.sync.refresh_contained, name)
