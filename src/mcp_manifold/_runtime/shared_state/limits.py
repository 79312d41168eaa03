"""Per-principal rate and in-flight limits shared by every replica: one bucket per principal in Redis.

Each admission is one round trip: a Lua script that, atomically, drops expired in-flight slots, checks the
principal's calls in flight, takes a token from its bucket (refilled by the store's own clock, so replicas'
clocks never disagree) and records the new slot. A slot carries an expiry (`lease`), so the slots of a
replica that died free themselves; a finished call's slot is removed in the background, off the call's path.

While the store cannot be reached, each replica applies the same limits on its own (`fallback`) and says so
loudly: calls go on, at worst n replicas allow n times the rate until the store is back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._core.limits import ANONYMOUS, PrincipalLimits, concurrency_refusal, rate_refusal
from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)

# KEYS: the bucket (hash: t tokens, at ms), the slots in flight (sorted set: slot -> expiry ms).
# ARGV: rate per second, burst, concurrency, slot id, lease ms. Returns {0, 0} admitted, {1, wait ms} over
# the rate, {2, running} over the calls in flight.
ACQUIRE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local rate, burst, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local lease = tonumber(ARGV[5])
if limit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local running = redis.call('ZCARD', KEYS[2])
  if running >= limit then return {2, running} end
end
if rate > 0 then
  local state = redis.call('HMGET', KEYS[1], 't', 'at')
  local tokens = tonumber(state[1])
  if tokens == nil then
    tokens = burst
  else
    tokens = math.min(burst, tokens + (now - tonumber(state[2])) * rate / 1000)
  end
  if tokens < 1 then return {1, math.ceil((1 - tokens) * 1000 / rate)} end
  redis.call('HSET', KEYS[1], 't', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
end
if limit > 0 then
  redis.call('ZADD', KEYS[2], now + lease, ARGV[4])
  redis.call('PEXPIRE', KEYS[2], lease + 1000)
end
return {0, 0}
"""
_LOCAL = "local"  # a slot taken from the fallback while the store was down


class SharedLimits:
    """`PrincipalLimits` kept in the shared store; `acquire` is awaited (`waits`), `release` is not."""

    waits = True

    def __init__(self, store: StateStore, fallback: PrincipalLimits, lease: float) -> None:
        self.store = store
        self.fallback = fallback
        self.rate = fallback.rate
        self.burst = fallback.burst
        self.concurrency = fallback.concurrency
        self.lease_ms = math.ceil(lease * 1000)
        self._script: Any = store.client.register_script(ACQUIRE)
        self._mine: dict[str, list[str]] = {}  # principal -> the slots this replica holds
        self._releases, self._to_release = anyio.create_memory_object_stream[tuple[str, str]](10_000)

    @property
    def active(self) -> bool:
        return self.fallback.active

    async def acquire(self, principal: str | None) -> None:
        who = principal or ANONYMOUS
        slot = f"{self.store.replica_id}:{secrets.token_hex(6)}"
        keys = [self.store.key("limit", "rate", who), self.store.key("limit", "flight", who)]
        args = [self.rate, self.burst, self.concurrency, slot, self.lease_ms]
        try:
            verdict, value = await self.store.run("limits", lambda: self._script(keys=keys, args=args))
        except StateUnavailable:
            self.fallback.acquire(principal)  # raises RateLimited as a single gateway would
            self._mine.setdefault(who, []).append(_LOCAL)
            return
        if verdict == 2:
            raise concurrency_refusal(who, int(value), self.concurrency)
        if verdict == 1:
            raise rate_refusal(who, int(value) / 1000, self.rate, self.burst)
        self._mine.setdefault(who, []).append(slot)

    def release(self, principal: str | None) -> None:
        who = principal or ANONYMOUS
        slots = self._mine.get(who)
        if not slots:
            return
        slot = slots.pop()
        if not slots:
            del self._mine[who]
        if slot == _LOCAL:
            self.fallback.release(principal)
        elif self.concurrency:
            with contextlib.suppress(anyio.WouldBlock):  # else the store is far behind: the slot's lease frees it
                self._releases.send_nowait((who, slot))

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Remove finished calls' slots, a batch per round trip, until the gateway stops."""
        task_status.started()
        async with self._to_release:
            async for first in self._to_release:
                batch = [first]
                while True:
                    try:
                        batch.append(self._to_release.receive_nowait())
                    except anyio.WouldBlock:
                        break
                pipe = self.store.client.pipeline(transaction=False)
                for who, slot in batch:
                    pipe.zrem(self.store.key("limit", "flight", who), slot)
                with contextlib.suppress(StateUnavailable):  # else their leases free them
                    await self.store.run("limits", pipe.execute)
