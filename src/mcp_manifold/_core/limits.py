"""Per-principal limits: a request rate (a token bucket) and calls in flight. Plain state, injectable clock.

Every call, read and prompt of a principal takes a token from its bucket (`rate` per second, up to
`burst` saved up) and a slot among its `concurrency` calls in flight; a call over either limit is
refused at once with how long to wait, never queued. Per-server limits (`max_concurrency`) are the
backends' and stay as they are.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mcp_manifold._errors import RateLimited

ANONYMOUS = "anonymous"  # the principal of an unauthenticated client (stdio, loopback HTTP)
_CONCURRENCY_RETRY = 1.0  # seconds suggested when every slot is taken (calls end at no known time)


@dataclass
class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; starts full."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    updated: float = field(init=False, default=-math.inf)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self, now: float) -> float:
        """Take one token: 0.0 when there was one, else the seconds until there will be."""
        if self.updated != -math.inf:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def full(self, now: float) -> bool:
        return self.tokens + (now - self.updated) * self.rate >= self.burst


def concurrency_refusal(who: str, running: int, limit: int) -> RateLimited:
    return RateLimited(
        f"principal {who!r} already has {running} call(s) in flight (limit {limit}); "
        f"retry after {_CONCURRENCY_RETRY:g} s or when one of them finishes",
        retry_after=_CONCURRENCY_RETRY,
    )


def rate_refusal(who: str, wait: float, rate: float, burst: int) -> RateLimited:
    retry = math.ceil(wait * 10) / 10
    return RateLimited(
        f"principal {who!r} is over its rate limit of {rate:g} call(s) per second "
        f"(bursts of {burst}); retry after {retry:g} s",
        retry_after=retry,
    )


class Limits(Protocol):
    """Per-principal limits: kept by this process (`PrincipalLimits`) or shared by the replicas of one gateway
    (`_runtime/shared_state/limits.py`). With `waits` the policy awaits `acquire` (a round trip to the store);
    without it, it calls it: a single gateway pays nothing more than a dictionary lookup."""

    waits: bool

    @property
    def active(self) -> bool: ...

    def acquire(self, principal: str | None) -> object:
        """Admit one call (pair it with `release`), or raise `RateLimited`; awaitable when `waits`."""
        ...

    def release(self, principal: str | None) -> None: ...


class PrincipalLimits:
    """The rate and concurrency limits of every principal; 0 turns a limit off."""

    waits = False

    def __init__(self, rate: float, burst: int, concurrency: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst) if rate > 0 else 0
        self.concurrency = concurrency
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._in_flight: dict[str, int] = {}

    @property
    def active(self) -> bool:
        return self.rate > 0 or self.concurrency > 0

    def acquire(self, principal: str | None) -> None:
        """Admit one call of `principal` (pair it with `release`), or raise `RateLimited` saying when to retry."""
        who = principal or ANONYMOUS
        running = self._in_flight.get(who, 0)
        if self.concurrency and running >= self.concurrency:
            raise concurrency_refusal(who, running, self.concurrency)
        if self.rate > 0:
            now = self.clock()
            bucket = self._buckets.get(who)
            if bucket is None:
                if len(self._buckets) > 1024:
                    self._forget_idle(now)
                bucket = self._buckets[who] = TokenBucket(self.rate, self.burst)
            wait = bucket.take(now)
            if wait > 0:
                raise rate_refusal(who, wait, self.rate, self.burst)
        self._in_flight[who] = running + 1

    def release(self, principal: str | None) -> None:
        who = principal or ANONYMOUS
        running = self._in_flight.get(who, 0) - 1
        if running > 0:
            self._in_flight[who] = running
        else:
            self._in_flight.pop(who, None)

    def _forget_idle(self, now: float) -> None:
        """Drop full buckets (principals idle long enough to have saved up a whole burst)."""
        for who in [who for who, bucket in self._buckets.items() if bucket.full(now)]:
            del self._buckets[who]
