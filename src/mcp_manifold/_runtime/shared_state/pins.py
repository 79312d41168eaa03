"""Tool pins shared by the replicas: what one replica pins, quarantines or an operator decides reaches the rest.

Each replica keeps its own `pins.sqlite` (the call path asks it in memory); every pin it changes is also
written to one Redis hash, and a version counter moves. Every replica polls that counter twice a second and
takes the entries that changed since it last looked, so `manifold pins approve` on any replica lifts the
quarantine on every replica within a second.

What came last is what reached the store last: no machine's clock decides (a replica or an operator's laptop
whose clock is behind would otherwise see its decisions dropped). A change is written as it is; what a
replica merely knows (all its pins, sent at start and when the store lost its data) is written only where
the store has nothing for that tool.

While the store is down, each replica keeps judging its own listings (quarantines still apply where the
replica sees the change); what it changed meanwhile is written when the store is back.

A hub instance registered under a generated id is gone for good once its record goes: the replica that drops it
removes its pins from the hash and notes the id in a list of forgotten servers (the last `FORGOTTEN_KEPT`), so
every other replica forgets them too, and one that starts later drops them from its own file instead of
offering them back.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._core.pins import Pin
from mcp_manifold._errors import ManifoldError
from mcp_manifold._runtime.pin_store import PinStore
from mcp_manifold._runtime.shared_state.pin_entries import read_pins
from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)

POLL = 0.5
# KEYS: the pins hash, the version counter. ARGV: field, pin JSON, "1" to write only where the field is absent.
# Returns 1 when the entry is (now) the one given, 0 when another was kept.
PUT = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old == ARGV[2] then return 1 end
if old and ARGV[3] == '1' then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
return 1
"""
FORGOTTEN_KEPT = 10_000
# KEYS: the pins hash, the version counter, the forgotten servers (a sorted set scored by version). ARGV: server.
FORGET = """
local prefix = ARGV[1] .. '\t'
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, #prefix) == prefix then redis.call('HDEL', KEYS[1], field) end
end
local version = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], version, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -1 - tonumber(ARGV[2]))
return version
"""
# KEYS: the version counter, the store's mark. ARGV: a new mark. Returns the version ('' when none) and the mark,
# made here when the store has none: a store that lost its data (restarted without persistence, flushed) has
# another mark from then on, whatever its counter reads. The counter alone cannot tell: another replica's pins
# written back first, or the new store's own forgets, number it from 1 again before this replica looks.
# A full store that has no mark yet (one an older version filled) is read unmarked ('') rather than refused.
LOOK = """
local mark = redis.call('GET', KEYS[2])
if not mark then
  mark = ''
  if not redis.pcall('SET', KEYS[2], ARGV[1]).err then mark = ARGV[1] end
end
return {redis.call('GET', KEYS[1]) or '', mark}
"""


class SharedPins:
    def __init__(self, store: StateStore, pins: PinStore, changed: Callable[[], Awaitable[None]]) -> None:
        self.store = store
        self.pins = pins
        self.changed = changed  # what clients may see changed: tell them
        self.key = store.key("pins")
        self.version_key = store.key("pins", "version")
        self.forgotten_key = store.key("pins", "forgotten")
        self.mark_key = store.key("pins", "mark")
        self._put: Any = store.client.register_script(PUT)
        self._look: Any = store.client.register_script(LOOK)
        self._forget: Any = store.client.register_script(FORGET)
        self._forgetting: list[str] = []  # servers this replica forgot, on their way to the store
        self._forgotten_seen: float | None = None  # the version of the last forgotten server taken
        self._pending: dict[tuple[str, str], tuple[Pin, bool]] = {}  # -> the pin, whether only where absent
        self._seen_version: tuple[bytes, bytes] | None = None  # the store's mark and version, as last taken
        self._seen: dict[Any, Any] = {}  # the hash as last read: only what changed since is taken
        self._wake = anyio.Event()
        pins.on_change = self.push
        pins.on_forget = self.forgot

    def push(self, changed: list[Pin]) -> None:
        """Pins this replica changed: written as they are."""
        for pin in changed:
            self._pending[pin.key] = (pin, False)
        self._wake.set()

    def forgot(self, server: str) -> None:
        """This replica forgot a server's pins: the store and the other replicas forget them too."""
        for key in [key for key in self._pending if key[0] == server]:
            del self._pending[key]
        self._forgetting.append(server)
        self._wake.set()

    def offer(self, known: list[Pin]) -> None:
        """Pins this replica knows: written where the store has none (a change waiting keeps its way)."""
        for pin in known:
            self._pending.setdefault(pin.key, (pin, True))
        self._wake.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # What other replicas decided before this one started holds from its first request.
        await self._exchange(flush=False)
        self.offer(self.pins.pins())  # and what this one knows goes up, where the store has nothing
        task_status.started()
        while True:
            with anyio.move_on_after(POLL):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self._exchange(flush=True)

    async def _exchange(self, *, flush: bool) -> None:
        try:
            if flush:
                await self._flush()
            if await self._pull() and flush:
                await self.changed()
        except StateUnavailable:
            pass  # pending pins stay pending until the store is back
        except Exception:  # whatever else went wrong, the next round tries again: it never ends the gateway
            logger.exception("could not exchange pins with the shared state store")

    async def _flush(self) -> None:
        while self._forgetting:
            keys = [self.key, self.version_key, self.forgotten_key]
            forget = [self._forgetting[0], FORGOTTEN_KEPT]
            await self.store.run("pins", lambda k=keys, a=forget: self._forget(keys=k, args=a))
            self._forgetting.pop(0)
        while self._pending:
            key, entry = next(iter(self._pending.items()))
            pin, absent_only = entry
            args = [_field(pin), json.dumps(asdict(pin)), "1" if absent_only else "0"]
            await self.store.run("pins", lambda a=args: self._put(keys=[self.key, self.version_key], args=a))
            if self._pending.get(key) is entry:
                del self._pending[key]

    async def _pull(self) -> bool:
        """Merge the pins other replicas changed since the last look; True when quarantines changed."""
        keys, mark = [self.version_key, self.mark_key], secrets.token_hex(8)
        number, marked = await self.store.run("pins", lambda: self._look(keys=keys, args=[mark]))
        version = (marked, number)
        if self._seen_version is not None and self._seen_version[0] not in (b"", marked):  # ('': full, unmarked)
            # The store lost its data (restarted without persistence): what this replica knows goes up again.
            self.offer(self.pins.pins())
            self._forgotten_seen = None  # the list of forgotten servers starts again too
        if version == self._seen_version:
            return False
        forgot = await self._take_forgotten()
        raw = await self.store.run("pins", lambda: self.store.client.hgetall(self.key))
        self._seen_version = version
        changed = {field: text for field, text in raw.items() if self._seen.get(field) != text}
        self._seen = raw
        # A change of this replica's still on its way to the store is newer than what the store has.
        taken = [pin for pin in read_pins(changed) if not self._changing(pin.key)]
        return self.pins.merge(taken) or forgot

    async def _take_forgotten(self) -> bool:
        """Forget here the servers another replica forgot since the last look (at the first look, every one still
        listed: a replica that was stopped meanwhile drops them from its file rather than offering them back);
        True when quarantines changed (a forgotten server's held tools are served again: clients are told)."""
        low = "-inf" if self._forgotten_seen is None else f"({self._forgotten_seen}"
        entries = await self.store.run(
            "pins", lambda: self.store.client.zrangebyscore(self.forgotten_key, low, "+inf", withscores=True)
        )
        if not entries:
            return False
        self._forgotten_seen = max(score for _member, score in entries)
        servers = {_text(member) for member, _score in entries}
        blocked = self.pins.quarantined()
        for server in servers & self.pins.servers():
            self.pins.forget(server, tell=False)
        # Nor are they written back from here: the pins offered when the store lost its data (this look's) came
        # from the memory the forget was meant to empty, and went up over it to every replica.
        for key in [key for key in self._pending if key[0] in servers]:
            del self._pending[key]
        # What the last look took of them counts as new if it is pinned again.
        self._seen = {field: text for field, text in self._seen.items() if _text(field).split("\t")[0] not in servers}
        return self.pins.quarantined() != blocked

    def _changing(self, key: tuple[str, str]) -> bool:
        entry = self._pending.get(key)
        return entry is not None and not entry[1]


async def publish_decisions(state_url: str, decided: list[Pin]) -> None:
    """`manifold pins approve/reject` with `state_url` set: put the decisions in the shared store directly, so
    every replica takes them within a second even when no replica runs on this machine's data dir."""
    store = StateStore(state_url, "pins-cli", announce=False)
    try:
        put: Any = store.client.register_script(PUT)
        keys = [store.key("pins"), store.key("pins", "version")]
        for pin in decided:
            args = [_field(pin), json.dumps(asdict(pin)), "0"]
            if not await store.run("pins", lambda a=args: put(keys=keys, args=a)):
                raise ManifoldError(f"the decision on {pin.server}/{pin.tool} was not applied in the shared store")
    finally:
        await store.close()


async def publish_forgotten(state_url: str, servers: list[str]) -> None:
    """`manifold pins forget` with `state_url` set: the servers' pins leave the shared store, and every replica
    forgets them within a second (one stopped meanwhile, at its start), as for a hub instance gone for good."""
    store = StateStore(state_url, "pins-cli", announce=False)
    try:
        forget: Any = store.client.register_script(FORGET)
        keys = [store.key("pins"), store.key("pins", "version"), store.key("pins", "forgotten")]
        for server in servers:
            await store.run("pins", lambda a=[server, FORGOTTEN_KEPT]: forget(keys=keys, args=a))
    finally:
        await store.close()


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _field(pin: Pin) -> str:
    return f"{pin.server}\t{pin.tool}"


async def shared_pins(state_url: str) -> list[Pin]:
    """Every pin in the shared store: what `manifold pins` merges into its own data dir's store first, so a
    machine that runs no replica sees (and decides on) what the replicas pinned."""
    return (await shared_pins_and_forgotten(state_url))[0]


async def shared_pins_and_forgotten(state_url: str) -> tuple[list[Pin], set[str]]:
    """Every pin in the shared store, and the servers forgotten (`pins:forgotten`): a data dir that held pins of
    one before its forget must not show them, nor publish a decision on one back over the forget."""
    store = StateStore(state_url, "pins-cli", announce=False)
    try:
        raw = await store.run("pins", lambda: store.client.hgetall(store.key("pins")))
        forgotten = await store.run("pins", lambda: store.client.zrange(store.key("pins", "forgotten"), 0, -1))
        return read_pins(raw), {_text(member) for member in forgotten}
    except StateUnavailable as exc:  # before any decision: one the replicas might never hear is not taken
        raise StateUnavailable(f"{exc}; nothing was changed: run it again once the store answers") from None
    finally:
        await store.close()
