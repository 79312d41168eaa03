"""The health state machine with a fake clock, and the monitor's decisions against a stand-in backend."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from mcp_manifold._config import Settings
from mcp_manifold._core.breaker import CircuitBreaker
from mcp_manifold._core.health import BACKOFF_MAX, Backoff, Health
from mcp_manifold._errors import BackendClosed, BackendStartError
from mcp_manifold._runtime.health import HealthMonitor


def test_backoff_doubles_with_jitter_between_one_and_thirty_seconds() -> None:
    low, high = Backoff(rng=lambda: 0.0), Backoff(rng=lambda: 1.0)
    assert [low.delay(n) for n in range(7)] == [1.0, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]
    assert [high.delay(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert all(1.0 <= Backoff().delay(n) <= BACKOFF_MAX for n in range(40))


def test_hub_defaults_match_the_issue() -> None:
    settings = Settings()
    assert (settings.ping_interval, settings.ping_timeout, settings.session_idle_timeout) == (10.0, 5.0, 1800.0)
    assert settings.discovery_dir is None  # $XDG_RUNTIME_DIR/manifold/instances (test_instances)


def test_states_from_discovered_to_dead_and_back() -> None:
    health = Health(interval=10, backoff=Backoff(rng=lambda: 1.0))
    assert health.state == "discovered" and health.action(0) is None  # never started: nothing to do
    assert health.connecting(0) == "connecting"
    assert health.connected(1) == "active"
    assert health.action(5) is None and health.action(11) == "ping"
    assert health.ping_ok(11) == "active" and health.next_check == 21

    assert health.failed(21, "no answer to ping within 5s") == "retrying"
    assert health.next_check == 22 and health.action(21.5) is None and health.action(22) == "reconnect"
    assert health.retry_in(21.5) == 0.5
    assert health.failed(22, "refused") == "retrying" and health.next_check == 24
    assert health.failed(24, "refused") == "dead" and health.next_check == 28
    assert health.last_error == "refused" and health.action(28) == "reconnect"
    assert health.failed(28, "refused") == "dead" and health.next_check == 36  # backoff keeps growing

    assert health.connecting(36) == "dead"  # an attempt in progress does not hide the state
    assert health.connected(36) == "active"
    assert (health.failures, health.attempts, health.last_error, health.retry_in(36)) == (0, 0, None, None)
    assert health.failed(46, "x") == "retrying" and health.next_check == 47  # the backoff starts over


def test_postpone_moves_the_next_check_only_later() -> None:
    health = Health(interval=10)
    health.connected(0)
    health.postpone(0, 3)
    assert health.next_check == 10
    health.postpone(0, 15)
    assert health.next_check == 15


class StandIn:
    """Just enough of a Backend for the monitor: a state, a request that succeeds or fails, stop."""

    def __init__(self, name: str = "alpha", state: str = "ready") -> None:
        self.name = name
        self.state = state
        self.last_error: str | None = None
        self.up = True
        self.requests = 0
        self.stops = 0
        self.breaker = CircuitBreaker(threshold=99, cooldown=5)
        self.config = SimpleNamespace(transport="http")  # reconnects bounded as for a URL
        self.needs_login = False  # an OAuth server waiting for a login is pinged, never restarted

    async def request(self, action: str, call: Any) -> None:
        self.requests += 1
        if not self.up:
            self.state = "failed"
            self.last_error = "connection refused"
            raise BackendStartError(self.name, "failed to start: connection refused")
        self.state = "ready"

    async def ping(self) -> None:
        await self.request("ping", None)

    async def stop(self) -> None:
        self.stops += 1
        self.state = "stopped"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def monitor(clock: FakeClock) -> HealthMonitor:
    settings = Settings(ping_interval=10, ping_timeout=1)
    return HealthMonitor(settings, clock=clock, backoff=Backoff(rng=lambda: 1.0))


@pytest.mark.anyio
async def test_monitor_pings_reconnects_and_reports_changes() -> None:
    clock, backend = FakeClock(), StandIn()
    watcher = monitor(clock)
    changes: list[tuple[str, str]] = []
    watcher.subscribe(lambda name, old, new, health: changes.append((old, new)))

    await watcher.connect(backend)  # type: ignore[arg-type]
    assert changes == [("discovered", "connecting"), ("connecting", "active")] and backend.stops == 0

    backend.up = False
    await watcher.ping(backend)  # type: ignore[arg-type]
    assert watcher.health["alpha"].state == "retrying" and "connection refused" in watcher.health["alpha"].last_error
    for _ in range(2):
        with pytest.raises(BackendStartError):
            await watcher.connect(backend)  # type: ignore[arg-type]
    assert watcher.health["alpha"].state == "dead" and backend.stops == 2  # restarted from scratch each time
    assert changes[-3:] == [("connecting", "active"), ("active", "retrying"), ("retrying", "dead")]
    backend.up = True
    await watcher.connect(backend)  # type: ignore[arg-type]
    assert changes[-1] == ("dead", "active")  # reconnect attempts in between changed nothing


@pytest.mark.anyio
async def test_monitor_ignores_backends_never_started_and_waits_for_the_breaker() -> None:
    clock = FakeClock()
    watcher = monitor(clock)
    lazy, running = StandIn("lazy", state="stopped"), StandIn("running")
    with anyio.move_on_after(0.3):
        await watcher.run(lambda: [lazy, running])  # type: ignore[arg-type, return-value]
    assert "lazy" not in watcher.health and lazy.requests == 0  # never started just to be pinged
    assert watcher.health["running"].state == "active"

    # A failing backend whose breaker is open is retried when the breaker allows a trial, not before.
    running.up = False
    await watcher.ping(running)  # type: ignore[arg-type]
    running.breaker = CircuitBreaker(threshold=1, cooldown=5, clock=clock)
    running.breaker.failure("refused")  # open at 0 for 5 s
    clock.now = watcher.health["running"].next_check  # 1: a reconnect is due
    with anyio.move_on_after(0.3):
        await watcher.run(lambda: [running])  # type: ignore[arg-type, return-value]
    assert running.requests == 1 and watcher.health["running"].next_check == 5
    assert watcher.health["running"].failures == 1  # waiting for the breaker is not a failure


@pytest.mark.anyio
async def test_a_call_that_lost_the_connection_counts_at_once() -> None:
    clock, backend = FakeClock(), StandIn()
    watcher = monitor(clock)
    await watcher.connect(backend)  # type: ignore[arg-type]
    watcher.report_failure("alpha", str(BackendClosed("alpha", "tools/call failed: connection closed")))
    assert watcher.health["alpha"].state == "retrying"
    watcher.report_failure("alpha", "again")  # only an active backend is demoted this way
    assert watcher.health["alpha"].failures == 1


@pytest.mark.anyio
async def test_pings_off_means_no_loop() -> None:
    watcher = HealthMonitor(Settings(ping_interval=0))
    with anyio.fail_after(1):
        await watcher.run(lambda: [StandIn()])  # type: ignore[arg-type, return-value]
    assert watcher.health == {}
