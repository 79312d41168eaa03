"""A circuit breaker for one backend: plain state, no I/O, an injectable clock.

After `threshold` failures in a row the breaker opens and calls fail fast for `cooldown` seconds.
Then it is half-open: exactly one trial call is let through; its success closes the breaker, its
failure opens it again for another cooldown. A trial that ends without a verdict (the caller was
cancelled) gives its turn back, so the breaker never sticks half-open.

A run of failures that all came from one principal's calls pauses that principal only: on a shared
gateway, one caller whose input crashes a server must not pause it for everyone, over and over. Its
calls to the server fail fast for `cooldown`; then its next call is its trial (a failure pauses it again
at once, a success ends the pause). A run with calls of two principals, or of none (a client without
authentication, a health ping), opens the breaker for all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Literal

BreakerState = Literal["closed", "open", "half-open"]


@dataclass(frozen=True)
class Admission:
    """The breaker's answer to one call: go ahead (perhaps as the trial), or fail fast."""

    allowed: bool
    trial: bool = False
    retry_in: float = 0.0  # when refused: seconds until a trial call is let through
    paused: bool = False  # refused because the caller's own calls failed (the server goes on for others)
    own_trial: bool = False  # the first call of a principal whose pause is over


_GO = Admission(True)


class CircuitBreaker:
    """Counts consecutive failures of one backend and decides whether a call may go ahead."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = max(1, threshold)
        self.cooldown = max(0.0, cooldown)
        self.clock = clock
        self.failures = 0  # consecutive failures (reset by any success)
        self.last_failure: str | None = None
        self._opened_at: float | None = None
        self._trial_running = False
        # The run of failures: the one principal whose calls failed in it, else mixed (two principals, or a
        # call of none). Set at a run's first failure.
        self._run_of: Hashable | None = None
        self._run_mixed = False
        self._paused: dict[Hashable, float] = {}  # principal -> when its pause began (kept for its trial)
        self._trying: set[Hashable] = set()  # paused principals whose trial call is running

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._trial_running or self.clock() - self._opened_at >= self.cooldown:
            return "half-open"
        return "open"

    def retry_in(self) -> float | None:
        """Seconds until the next trial call, while open; None otherwise."""
        if self.state != "open":
            return None
        assert self._opened_at is not None
        return max(0.0, self._opened_at + self.cooldown - self.clock())

    def admit(self, who: Hashable | None = None) -> Admission:
        """Ask before each call of principal `who` (None: none); a `trial` or `own_trial` admission must end in
        `success`, `failure` or `abandon`, with the same `who`."""
        if self._paused and who in self._paused:
            return self._admit_paused(who)
        if self._opened_at is None:  # closed: every call of a healthy server asks, so no allocation
            return _GO
        return self._admit_open(False)

    def _admit_open(self, own_trial: bool) -> Admission:
        if self.state == "half-open" and not self._trial_running:
            self._trial_running = True
            return Admission(True, trial=True, own_trial=own_trial)
        # Open, or half-open with the trial still running: the others wait for its verdict.
        return Admission(False, retry_in=self.retry_in() or 0.0)

    def _admit_paused(self, who: Hashable) -> Admission:
        left = self._paused[who] + self.cooldown - self.clock()
        if left > 0 or who in self._trying:  # paused, or its one trial call is running
            return Admission(False, retry_in=max(left, 0.0), paused=True)
        admission = Admission(True, own_trial=True) if self._opened_at is None else self._admit_open(True)
        if admission.allowed:
            self._trying.add(who)
        return admission

    def success(self, who: Hashable | None = None) -> None:
        """The backend answered: whatever the state, it works, so the breaker closes."""
        self.failures = 0
        self._opened_at = None
        self._trial_running = False
        if self._paused:
            self._paused.pop(who, None)
            self._trying.discard(who)

    def failure(self, reason: str, who: Hashable | None = None) -> None:
        now = self.clock()
        self.last_failure = reason
        if who is not None and who in self._paused:  # its trial after its pause (or a call from before) failed
            self._paused[who] = now
            self._trying.discard(who)
            if self._trial_running:  # it was the server's trial as well
                self._opened_at, self._trial_running = now, False
            return
        if self.failures == 0:
            self._run_of, self._run_mixed = who, who is None
        elif who != self._run_of:
            self._run_mixed = True
        self.failures += 1
        if self._opened_at is None and self.failures >= self.threshold and not self._run_mixed:
            self._pause(who, now)
            return
        if self._trial_running or (self._opened_at is None and self.failures >= self.threshold):
            self._opened_at = now
        self._trial_running = False

    def _pause(self, who: Hashable, now: float) -> None:
        """A run of one principal's failures: that principal waits, the others' calls go on."""
        # Pauses long over whose principal never came back are forgotten: the table stays small.
        self._paused = {key: began for key, began in self._paused.items() if now - began < 2 * self.cooldown}
        self._trying &= self._paused.keys()
        self._paused[who] = now
        self.failures = 0
        self._run_of, self._run_mixed = None, False

    def paused(self) -> list[Hashable]:
        """The principals whose own calls' failures pause them now."""
        now = self.clock()
        return [who for who, began in self._paused.items() if now - began < self.cooldown]

    def abandon(self, who: Hashable | None = None) -> None:
        """A trial call ended without a verdict (cancelled): let the next call be the trial."""
        self._trial_running = False
        self._trying.discard(who)
