"""`SharedState`: what one replica shares with the others through the store, started and stopped with it."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
import anyio.abc

from mcp_manifold._config import Settings
from mcp_manifold._core.limits import PrincipalLimits
from mcp_manifold._runtime.back_channel import BackChannel
from mcp_manifold._runtime.backends import Backend
from mcp_manifold._runtime.input_bridge import HeldCalls
from mcp_manifold._runtime.listing_cache import ListingCache
from mcp_manifold._runtime.pin_store import PinStore
from mcp_manifold._runtime.shared_state.held import HeldForwarding
from mcp_manifold._runtime.shared_state.instances import SharedInstanceRecords
from mcp_manifold._runtime.shared_state.learned import SharedLearning
from mcp_manifold._runtime.shared_state.limits import SharedLimits
from mcp_manifold._runtime.shared_state.listen import SharedSubscriptionBus
from mcp_manifold._runtime.shared_state.pins import SharedPins
from mcp_manifold._runtime.shared_state.replicas import ReplicaDirectory
from mcp_manifold._runtime.shared_state.shared_secrets import SharedSecret, keep_secrets, shared_secret
from mcp_manifold._runtime.shared_state.store import StateStore, StateUnavailable

logger = logging.getLogger(__name__)
_LEASE_MARGIN = 30.0  # seconds an in-flight slot outlives the longest call, before it frees itself


def replica_url(settings: Settings) -> str:
    """Where the other replicas reach this one: `replica_url`, else the HTTP address it serves."""
    if settings.replica_url:
        return settings.replica_url
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"http://{host}:{settings.port}"


_REACHABLE_FOR = 1.0  # seconds the store's answer to a readiness probe is taken as still true


class SharedState:
    def __init__(self, settings: Settings, replica_id: str, held: HeldCalls, snapshot: Callable[[], dict[str, Any]]):
        assert settings.state_url is not None
        self.settings = settings
        self.store = StateStore(settings.state_url, replica_id)
        self.held = held
        self.directory = ReplicaDirectory(self.store, held.holder, replica_url(settings), snapshot)
        self.limits: SharedLimits | None = None
        self.forwarding: HeldForwarding | None = None
        self.request_state_key: SharedSecret | None = None
        self.pins: SharedPins | None = None
        self.bus: SharedSubscriptionBus | None = None
        self.learning: SharedLearning | None = None
        self._reachable: tuple[float, bool] = (-1.0, False)  # (until when, the store's last answer)
        self._probing = anyio.Lock()

    def shared_limits(
        self, local: PrincipalLimits, longest_call: Callable[[], float]
    ) -> SharedLimits | PrincipalLimits:
        """`longest_call()`: seconds the longest call may run by the config now (asked at each admission)."""
        if not local.active:
            return local
        self.limits = SharedLimits(self.store, local, lambda: longest_call() + _LEASE_MARGIN)
        return self.limits

    def share_pins(self, pins: PinStore, changed: Callable[[], Awaitable[None]]) -> None:
        if pins.mode != "off":
            self.pins = SharedPins(self.store, pins, changed)

    def share_listen_streams(self, back_channel: BackChannel) -> None:
        self.bus = SharedSubscriptionBus(self.store, self.held.holder, back_channel.bus)
        back_channel.bus = self.bus  # type: ignore[assignment]

    def share_learning(self, cache: ListingCache, backends: Callable[[], Iterable[Backend]]) -> None:
        self.learning = SharedLearning(self.store, cache, backends)

    def instance_records(self) -> SharedInstanceRecords:
        return SharedInstanceRecords(self.store)

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Read the shared secrets (the store must answer: a replica that cannot share them must not serve),
        then keep this replica's heartbeat and background work going in `task_group`."""
        # Not announced as an outage (its ERROR line says limits are per replica until the store is back): a
        # replica that cannot start says so once, in the error below, and exits.
        announce, self.store.announce = self.store.announce, False
        try:
            if not self.settings.request_state_keys:
                key = "request-state"
                self.request_state_key = SharedSecret(key, await shared_secret(self.store, key))
            token = SharedSecret("replica-token", await shared_secret(self.store, "replica-token"))
        except StateUnavailable as exc:
            raise StateUnavailable(f"{exc}; a replica cannot start without it") from None
        finally:
            self.store.announce = announce
        self.forwarding = HeldForwarding(self.held, self.directory, token, self.settings.held_call_timeout)
        self.held.elsewhere = self.forwarding.forward
        known = [token] if self.request_state_key is None else [token, self.request_state_key]
        task_group.start_soon(keep_secrets, self.store, known)
        await task_group.start(self.directory.run)
        if self.limits is not None:
            await task_group.start(self.limits.run)
        if self.pins is not None:
            await task_group.start(self.pins.run)
        if self.bus is not None:
            await task_group.start(self.bus.run)
        if self.learning is not None:
            await self.learning.prefetch()
            await task_group.start(self.learning.run)

    async def stop(self) -> None:
        await self.directory.leave()
        if self.forwarding is not None:
            await self.forwarding.close()
        await self.store.close()

    async def replica_rows(self) -> list[dict[str, Any]]:
        try:
            return await self.directory.rows()
        except StateUnavailable:
            return [{"id": self.store.replica_id, "url": self.directory.url, "state_store": "unreachable"}]

    async def reachable(self) -> bool:
        """Whether the store answers, asked at most once a `_REACHABLE_FOR` (/readyz, which anyone may ask
        without a credential, sent the store one PING each: 1,500 asked, 1,646 commands)."""
        async with self._probing:  # those asking meanwhile take its answer
            until, answer = self._reachable
            if time.monotonic() >= until:
                answer = await self.store.ping()
                self._reachable = (time.monotonic() + _REACHABLE_FOR, answer)
            return answer
