"""Health of running backends: MCP pings on an interval, and reconnection with backoff.

`Health` is the state machine for one backend, plain code driven by the times handed to it:

    discovered -> connecting -> active -> retrying -> dead
                                   ^          |         |
                                   +----------+---------+  (a reconnect attempt succeeds)

A failed ping, call connection or reconnect attempt counts one failure; the third in a row makes
the backend `dead`. Retrying and dead backends get reconnect attempts with exponential backoff
and jitter (1 s up to 30 s), keeping their state while they try; one success makes them `active`.
The async loop around it (pings, reconnects) is `runtime.health.HealthMonitor`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

HealthState = Literal["discovered", "connecting", "active", "retrying", "dead"]
Action = Literal["ping", "reconnect"]
DEAD_AFTER = 3  # failures in a row
BACKOFF_START = 1.0
BACKOFF_MAX = 30.0


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
