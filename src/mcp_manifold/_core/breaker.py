"""A circuit breaker for one backend: plain state, no I/O, an injectable clock.

After `threshold` failures in a row the breaker opens and calls fail fast for `cooldown` seconds.
Then it is half-open: exactly one trial call is let through; its success closes the breaker, its
failure opens it again for another cooldown. A trial that ends without a verdict (the caller was
cancelled) gives its turn back, so the breaker never sticks half-open.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

BreakerState = Literal["closed", "open", "half-open"]


@dataclass(frozen=True)
class Admission:
    """The breaker's answer to one call: go ahead (perhaps as the trial), or fail fast."""

    allowed: bool
    trial: bool = False
    retry_in: float = 0.0  # when refused: seconds until a trial call is let through


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

    def admit(self) -> Admission:
        """Ask before each call; a `trial` admission must end in `success`, `failure` or `abandon`."""
        state = self.state
        if state == "closed":
            return Admission(True)
        if state == "half-open" and not self._trial_running:
            self._trial_running = True
            return Admission(True, trial=True)
        # Open, or half-open with the trial still running: the others wait for its verdict.
        return Admission(False, retry_in=self.retry_in() or 0.0)

    def success(self) -> None:
        """The backend answered: whatever the state, it works, so the breaker closes."""
        self.failures = 0
        self._opened_at = None
        self._trial_running = False

    def failure(self, reason: str) -> None:
        self.failures += 1
        self.last_failure = reason
        if self._trial_running or (self._opened_at is None and self.failures >= self.threshold):
            self._opened_at = self.clock()
        self._trial_running = False

    def abandon(self) -> None:
        """A trial call ended without a verdict (cancelled): let the next call be the trial."""
        self._trial_running = False
