"""Health of running backends: MCP pings on an interval, and reconnection with backoff.

`HealthMonitor` is the small async loop around `core.health.Health` (one per backend), run in the
gateway's task group; it pings only backends that are running (a lazy backend nobody used is never
started just to be pinged).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import anyio

from mcp_manifold._core.health import Action, Backoff, Health, HealthState
from mcp_manifold._errors import ManifoldError

if TYPE_CHECKING:
    from mcp_manifold._config import Settings
    from mcp_manifold._runtime.backends import Backend

logger = logging.getLogger(__name__)

_HTTP_CLOSE_WAIT = 1.0  # seconds a reconnect waits for an HTTP backend's old session to close

Listener = Callable[[str, HealthState, HealthState, Health], None]


class HealthMonitor:
    """Pings running backends and reconnects failing ones; owns one `Health` per backend name."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.backoff = backoff or Backoff()
        self.health: dict[str, Health] = {}
        self._listeners: list[Listener] = []
        self._busy: set[str] = set()
        self._locks: dict[str, anyio.Lock] = {}

    def subscribe(self, listener: Listener) -> None:
        """`listener(name, old, new, health)` after every state change."""
        self._listeners.append(listener)

    def track(self, name: str) -> Health:
        """Start tracking a backend (state `discovered`) or return its existing record."""
        if name not in self.health:
            self.health[name] = Health(interval=self.settings.ping_interval or 10.0, backoff=self.backoff)
        return self.health[name]

    def forget(self, name: str) -> None:
        self.health.pop(name, None)
        self._locks.pop(name, None)

    def _change(self, name: str, health: Health, update: Callable[[float], HealthState]) -> None:
        old = health.state
        new = update(self.clock())
        if new != old:
            logger.info("%s: %s -> %s%s", name, old, new, f" ({health.last_error})" if health.last_error else "")
            for listener in list(self._listeners):
                try:
                    listener(name, old, new, health)
                except Exception:
                    logger.exception("health listener failed")

    def report_failure(self, name: str, reason: str) -> None:
        """A call found the connection gone: count it now rather than at the next ping."""
        health = self.health.get(name)
        if health is not None and health.state == "active":
            self._change(name, health, lambda now: health.failed(now, reason))

    # --- I/O ---------------------------------------------------------------------------------

    async def connect(self, backend: Backend) -> None:
        """(Re)connect `backend` and ping it, recording the outcome; raises the failure.

        One attempt at a time per backend. A backend that is not cleanly running is stopped
        first, so its old connection has finished closing before a new one opens.
        """
        health = self.track(backend.name)
        lock = self._locks.setdefault(backend.name, anyio.Lock())
        async with lock:
            if backend.state == "ready" and health.state == "active":
                return
            # A failed backend, or a running one whose pings fail, is restarted from scratch; a
            # healthy running one (e.g. started by the catalog) is only pinged.
            suspect = backend.state == "failed" or (backend.state == "ready" and health.state in ("retrying", "dead"))
            self._change(backend.name, health, health.connecting)
            running_elsewhere = backend.config.transport != "stdio"
            try:
                if suspect:
                    # A hung HTTP server can hold its session's close for long; the old run closes on
                    # in the background. A stdio server is waited for: two copies must not run at once.
                    with anyio.move_on_after(_HTTP_CLOSE_WAIT if running_elsewhere else math.inf):
                        await backend.stop()
                # init_timeout is for a process that starts; a server that is already running (a URL)
                # answers initialize about as fast as a ping, so a hung one is found out as fast.
                initialize = self.settings.ping_timeout if running_elsewhere else self.settings.init_timeout
                with anyio.fail_after(initialize + self.settings.ping_timeout):
                    await backend.ping()
            except (ManifoldError, TimeoutError) as exc:
                reason = str(exc) or "timed out"
                self._change(backend.name, health, lambda now: health.failed(now, reason))
                raise
            self._change(backend.name, health, health.connected)

    async def ping(self, backend: Backend) -> None:
        """One ping of a running backend, bounded by `ping_timeout`."""
        health = self.track(backend.name)
        if backend.state == "starting":
            return  # someone else is (re)starting it; look again next tick
        if backend.state != "ready":
            reason = backend.last_error or f"not running ({backend.state})"
            self._change(backend.name, health, lambda now: health.failed(now, reason))
            return
        try:
            with anyio.fail_after(self.settings.ping_timeout):
                await backend.ping()
        except TimeoutError:
            reason = f"no answer to ping within {self.settings.ping_timeout:g}s"
            self._change(backend.name, health, lambda now: health.failed(now, reason))
        except ManifoldError as exc:
            if backend.needs_login:
                # The server answered: refused for want of a login, which a restart cannot give. Restarted, its
                # session (kept on purpose, see `remote_auth`) was dropped and its breaker opened.
                self._change(backend.name, health, health.ping_ok)
                return
            error = str(exc)
            self._change(backend.name, health, lambda now: health.failed(now, error))
        else:
            self._change(backend.name, health, health.ping_ok)

    async def run(self, backends: Callable[[], Iterable[Backend]]) -> None:
        """Check every running backend when it is due, until cancelled (pings off: returns)."""
        interval = self.settings.ping_interval
        if interval <= 0:
            return
        tick = min(1.0, max(0.05, interval / 4))
        async with anyio.create_task_group() as checks:
            while True:
                now = self.clock()
                for backend in list(backends()):
                    health = self.health.get(backend.name)
                    if health is None:
                        if backend.state != "ready":
                            continue  # never started (lazy) or disabled: nothing to watch yet
                        health = self.track(backend.name)
                        self._change(backend.name, health, health.connected)
                        continue
                    action = health.action(now)
                    if action is not None and backend.name not in self._busy:
                        self._busy.add(backend.name)
                        checks.start_soon(self._check, backend, action)
                await anyio.sleep(tick)

    async def _check(self, backend: Backend, action: Action) -> None:
        try:
            if action == "ping":
                await self.ping(backend)
            elif (wait := _breaker_wait(backend)) > 0:
                # The backend's circuit breaker refuses calls for now: attempt when it lets a trial
                # through, so the reconnect is that trial instead of a refused (and counted) call.
                self.track(backend.name).postpone(self.clock(), wait)
            else:
                try:
                    await self.connect(backend)
                except (ManifoldError, TimeoutError) as exc:
                    logger.debug("%s: reconnect failed: %s", backend.name, exc)
        except Exception:
            # A bug here must not end the loop that watches every other backend.
            logger.exception("health check of %s failed", backend.name)
        finally:
            self._busy.discard(backend.name)


def _breaker_wait(backend: Backend) -> float:
    return backend.breaker.retry_in() or 0.0
