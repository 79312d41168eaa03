"""Health of running backends: MCP pings on an interval, and reconnection with backoff.

`Health` is the state machine for one backend, plain code driven by the times handed to it:

    discovered -> connecting -> active -> retrying -> dead
                                   ^          |         |
                                   +----------+---------+  (a reconnect attempt succeeds)

A failed ping, call connection or reconnect attempt counts one failure; the third in a row makes
the backend `dead`. Retrying and dead backends get reconnect attempts with exponential backoff
and jitter (1 s up to 30 s), keeping their state while they try; one success makes them `active`.
`HealthMonitor` is the small async loop around it, run in the gateway's task group; it pings only
backends that are running (a lazy backend nobody used is never started just to be pinged).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio

from mcp_manifold._errors import ManifoldError

if TYPE_CHECKING:
    from mcp_manifold.backends import Backend
    from mcp_manifold.config import Settings

logger = logging.getLogger(__name__)

HealthState = Literal["discovered", "connecting", "active", "retrying", "dead"]
Action = Literal["ping", "reconnect"]
DEAD_AFTER = 3  # failures in a row
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0
_HTTP_CLOSE_WAIT = 1.0  # seconds a reconnect waits for an HTTP backend's old session to close


@dataclass
class Backoff:
    """Exponential delays with "equal jitter": half fixed, half random, within [start, cap]."""

    start: float = BACKOFF_START
    cap: float = BACKOFF_MAX
    rng: Callable[[], float] = random.random

    def delay(self, attempt: int) -> float:
        base = min(self.cap, self.start * 2 ** max(0, attempt))
        # The random half keeps many gateways (or many instances) from retrying in lockstep.
        return max(self.start, min(self.cap, base / 2 + self.rng() * base / 2))


@dataclass
class Health:
    """One backend's health; every method takes `now` so tests drive it with a fake clock."""

    interval: float
    backoff: Backoff = field(default_factory=Backoff)
    state: HealthState = "discovered"
    failures: int = 0  # failed pings or reconnects in a row
    attempts: int = 0  # reconnect attempts since the last success, for the backoff
    last_error: str | None = None
    since: float = 0.0  # when the state last changed
    next_check: float = 0.0

    def connecting(self, now: float) -> HealthState:
        # A reconnect keeps showing retrying or dead until it succeeds: the state says how the
        # backend is doing, and a failed attempt then changes nothing (no repeated "dead" news).
        if self.state in ("retrying", "dead"):
            return self.state
        return self._move("connecting", now)

    def connected(self, now: float) -> HealthState:
        self.failures = 0
        self.attempts = 0
        self.last_error = None
        self.next_check = now + self.interval
        return self._move("active", now)

    def ping_ok(self, now: float) -> HealthState:
        self.failures = 0
        self.next_check = now + self.interval
        return self.state

    def failed(self, now: float, reason: str) -> HealthState:
        """A ping, a call's connection or a reconnect attempt failed."""
        self.failures += 1
        self.last_error = reason
        self.next_check = now + self.backoff.delay(self.attempts)
        self.attempts += 1
        return self._move("dead" if self.failures >= DEAD_AFTER else "retrying", now)

    def postpone(self, now: float, seconds: float) -> None:
        """Move the next check later without counting anything (something else says "not yet")."""
        self.next_check = max(self.next_check, now + seconds)

    def action(self, now: float) -> Action | None:
        """What is due now: a ping of an active backend, a reconnect of a failing one, or nothing."""
        if now < self.next_check:
            return None
        if self.state == "active":
            return "ping"
        if self.state in ("retrying", "dead"):
            return "reconnect"
        return None

    def retry_in(self, now: float) -> float | None:
        if self.state not in ("retrying", "dead"):
            return None
        return max(0.0, self.next_check - now)

    def _move(self, state: HealthState, now: float) -> HealthState:
        if state != self.state:
            self.state = state
            self.since = now
        return state


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
                    await backend.request("ping", lambda session: session.send_ping())
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
                await backend.request("ping", lambda session: session.send_ping())
        except TimeoutError:
            reason = f"no answer to ping within {self.settings.ping_timeout:g}s"
            self._change(backend.name, health, lambda now: health.failed(now, reason))
        except ManifoldError as exc:
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
    breaker = getattr(backend, "breaker", None)
    wait = breaker.retry_in() if breaker is not None else None
    return wait or 0.0
