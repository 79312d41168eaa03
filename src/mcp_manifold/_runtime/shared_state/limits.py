"""Per-principal rate and in-flight limits shared by every replica: one bucket per principal in Redis.

Each admission is one round trip: a Lua script that, atomically, removes the slots of this replica's calls
that finished since its last admission, drops expired slots, checks the principal's calls in flight, takes
a token from its bucket (refilled by the store's own clock, so replicas' clocks never disagree) and records
the new slot. Finished calls' slots thus ride on the next admission (one command per call, not two); those
no admission took within `FOLD_WINDOW` are removed in the background, off the call's path. Except when the
principal has at least half its `principal_max_calls` in flight: then the call's slot is removed before its
answer goes out (`settle`), since its client's next call may reach another replica at once, and a slot still
counted there would refuse it (round robin refused every other call of a client calling one at a time at a
limit of 1). A slot carries
an expiry (`lease`), so the slots of a replica that died free themselves; the lease is asked at each
admission, so it follows the config (a server's own `timeout`, a reload) and a call never outlives its slot.

While the store cannot be reached, each replica applies the same limits on its own (`fallback`) and says so
loudly: calls go on, at worst n replicas allow n times the rate until the store is back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._core.limits import ANONYMOUS, PrincipalLimits, concurrency_refusal, rate_refusal
from mcp_manifold._runtime.shared_state.store import RETRY, StateStore, StateUnavailable

logger = logging.getLogger(__name__)

# KEYS: the bucket (hash: t tokens, at ms), the slots in flight (sorted set: slot -> expiry ms), then the
# sets of the finished slots to remove. ARGV: rate per second, burst, concurrency, slot id, lease ms, then
# the finished slots (ARGV[i + 3] is in KEYS[i]). Returns {0, running} admitted (the principal's calls in flight
# with this one), {1, wait ms} over the rate, {2, running} over the calls in flight.
ACQUIRE = """
for i = 3, #KEYS do redis.call('ZREM', KEYS[i], ARGV[i + 3]) end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local rate, burst, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local lease = tonumber(ARGV[5])
local running = 0
if limit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  running = redis.call('ZCARD', KEYS[2])
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
return {0, running + 1}
"""
_LOCAL = "local"  # a slot taken from the fallback while the store was down
FOLD_WINDOW = 0.05  # seconds a finished call's slot waits for the next admission to carry its removal
_MAX_FINISHED = 10_000  # past that the store is far behind: the slots' leases free them


class SharedLimits:
    """`PrincipalLimits` kept in the shared store; `acquire` is awaited (`waits`), `release` is not."""

    waits = True

    def __init__(self, store: StateStore, fallback: PrincipalLimits, lease: Callable[[], float]) -> None:
        """`lease()`: seconds a slot taken now may stay counted (longer than any call may run, by the config now)."""
        self.store = store
        self.fallback = fallback
        self.rate = fallback.rate
        self.burst = fallback.burst
        self.concurrency = fallback.concurrency
        self.lease = lease
        self._script: Any = store.client.register_script(ACQUIRE)
        self._mine: dict[str, list[str]] = {}  # principal -> the slots this replica holds
        self._finished: list[tuple[str, str]] = []  # (slots key, slot) of calls done, not yet removed
        self._tight: set[str] = set()  # slots taken with half the principal's calls in flight or more
        self._settling: dict[str, list[str]] = {}  # principal -> tight slots of calls done, removed by `settle`
        self._wake = anyio.Event()

    @property
    def active(self) -> bool:
        return self.fallback.active

    async def acquire(self, principal: str | None) -> None:
        who = principal or ANONYMOUS
        slot = f"{self.store.replica_id}:{secrets.token_hex(6)}"
        finished, self._finished = self._finished, []
        keys = [self.store.key("limit", "rate", who), self.store.key("limit", "flight", who)]
        keys += [key for key, _slot in finished]
        lease_ms = math.ceil(self.lease() * 1000)
        args = [self.rate, self.burst, self.concurrency, slot, lease_ms, *(slot for _key, slot in finished)]
        try:
            verdict, value = await self.store.run("limits", lambda: self._script(keys=keys, args=args))
        except StateUnavailable:
            self._finished[:0] = finished  # removed once the store is back (or freed by their leases)
            self.fallback.acquire(principal)  # raises RateLimited as a single gateway would
            self._mine.setdefault(who, []).append(_LOCAL)
            return
        except BaseException:
            # Cancelled on its way (its caller gone): the store may have run it or not. The slots it carried
            # and the one it may have taken are removed like finished ones (removing an absent slot is a no-op).
            self._finished[:0] = [*finished, (keys[1], slot)]
            self._wake.set()
            raise
        if verdict == 2:
            raise concurrency_refusal(who, int(value), self.concurrency)
        if verdict == 1:
            raise rate_refusal(who, int(value) / 1000, self.rate, self.burst)
        self._mine.setdefault(who, []).append(slot)
        if self.concurrency and int(value) * 2 >= self.concurrency:
            self._tight.add(slot)

    def release(self, principal: str | None) -> None:
        who = principal or ANONYMOUS
        slot = _take_last(self._mine, who)
        if slot is None:
            return
        if slot == _LOCAL:
            self.fallback.release(principal)
        elif self.concurrency and len(self._finished) < _MAX_FINISHED:
            self._finished.append((self.store.key("limit", "flight", who), slot))
            self._wake.set()
            if slot in self._tight:
                self._tight.discard(slot)
                self._settling.setdefault(who, []).append(slot)

    async def settle(self, principal: str | None) -> None:
        """After `release`, before the call's answer goes out: remove its slot now if it was taken with half the
        principal's calls in flight or more (see the module); else nothing (it rides on the next admission)."""
        who = principal or ANONYMOUS
        slot = _take_last(self._settling, who)
        if slot is None:
            return
        key = self.store.key("limit", "flight", who)
        with contextlib.suppress(ValueError):  # else an admission has carried it already (removing twice is a no-op)
            self._finished.remove((key, slot))
        try:
            await self.store.run("limits", lambda: self.store.client.zrem(key, slot))
        except BaseException as exc:
            # Removed in the background: once the store is back (the answer goes out all the same), or after
            # its request was cancelled on the way (which goes on).
            self._finished.append((key, slot))
            self._wake.set()
            if not isinstance(exc, StateUnavailable):
                raise

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Remove the finished calls' slots no admission carried within `FOLD_WINDOW`, a batch per round trip,
        until the gateway stops."""
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                await anyio.sleep(FOLD_WINDOW)
                self._wake = anyio.Event()
                if not await self._remove_finished():
                    await anyio.sleep(RETRY)  # the store is down: try again when it may be back
                    self._wake.set()
        finally:  # a replica stopping cleanly frees its last slots now, not when their leases end
            with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
                await self._remove_finished()

    async def _remove_finished(self) -> bool:
        """Remove the finished calls' slots; False when the store could not be reached (they wait for it)."""
        batch, self._finished = self._finished, []
        if not batch:
            return True
        pipe = self.store.client.pipeline(transaction=False)
        for key, slot in batch:
            pipe.zrem(key, slot)
        try:
            await self.store.run("limits", pipe.execute)
        except StateUnavailable:
            # Kept for the next admission or try: dropped, each slot would count as a call in flight on every
            # replica until its lease ends. Past `_MAX_FINISHED` the leases free the oldest.
            self._finished[:0] = batch[: max(0, _MAX_FINISHED - len(self._finished))]
            return False
        return True


def _take_last(slots_of: dict[str, list[str]], who: str) -> str | None:
    """The last slot `who` has in `slots_of`, taken out (its entry goes with its last slot); None if none."""
    slots = slots_of.get(who)
    if not slots:
        return None
    slot = slots.pop()
    if not slots:
        del slots_of[who]
    return slot
