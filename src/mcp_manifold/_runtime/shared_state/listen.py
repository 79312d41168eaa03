"""`subscriptions/listen` across replicas: the SDK's `SubscriptionBus` over Redis pub/sub.

An event published on one replica (a server's list changed, a resource was updated) goes to that replica's
own listen streams at once and to one Redis channel; every other replica hears it there and gives it to its
streams. A list event carries which items changed (up to `MAX_CARRIED`), so every replica's streams admit it
only for callers who may see one of them, as the replica that saw it does. Delivery is fire-and-forget, as the
SDK's bus is: while the store is down, events reach only the streams of the replica that saw them (clients
refetch when they re-listen), and the subscriber reconnects.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent

from mcp_manifold._runtime.list_events import Items, changed_items, list_changed, list_kind
from mcp_manifold._runtime.shared_state.store import RETRY, StateStore, StateUnavailable

RESUBSCRIBE_PAUSE = 0.2  # seconds before subscribing again after a subscription ended
# The most items of a list change an event carries; past it, it says "not known" and reaches every stream (a
# server listing thousands of tools anew must not publish megabytes to every replica).
MAX_CARRIED = 256

logger = logging.getLogger(__name__)

_KINDS = ("tools", "prompts", "resources")


def encode(event: ServerEvent, origin: str) -> str:
    if isinstance(event, ResourceUpdated):
        return json.dumps({"origin": origin, "updated": event.uri})
    data: dict[str, object] = {"origin": origin, "list": list_kind(event)}
    changed = changed_items(event)
    if changed is not None and len(changed) <= MAX_CARRIED:
        data["items"] = sorted(changed)  # which items changed: other replicas' streams judge by them too
    return json.dumps(data)


def decode(text: str | bytes) -> tuple[str, ServerEvent] | None:
    try:
        data = json.loads(text)
        if "updated" in data:
            return str(data["origin"]), ResourceUpdated(str(data["updated"]))
        kind = data["list"]
        if kind not in _KINDS:
            return None
        return str(data["origin"]), list_changed(kind, _items(data.get("items")))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _items(value: object) -> Items | None:
    """The items an event carries; None (not known: every stream hears of it) when it carries none it can read."""
    if not isinstance(value, list) or not all(
        isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item) for item in value
    ):
        return None
    return frozenset((server, name) for server, name in value)


class SharedSubscriptionBus:
    """A `SubscriptionBus` whose events reach the listen streams of every replica."""

    def __init__(self, store: StateStore, origin: str, local: InMemorySubscriptionBus) -> None:
        self.store = store
        self.origin = origin  # this replica's mark on what it publishes, so it does not hear itself twice
        self.local = local
        self.channel = store.key("events")

    async def publish(self, event: ServerEvent) -> None:
        await self.local.publish(event)
        text = encode(event, self.origin)
        with contextlib.suppress(StateUnavailable):
            await self.store.run("listen streams", lambda: self.store.client.publish(self.channel, text))

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        return self.local.subscribe(listener)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hand the other replicas' events to this replica's streams until the gateway stops."""
        started = False
        while True:
            pubsub: Any = self.store.client.pubsub(ignore_subscribe_messages=True)
            subscribed = False
            try:
                await pubsub.subscribe(self.channel)
                subscribed = True
                self.store.came_back()
                if not started:
                    started = True
                    task_status.started()
                async for message in pubsub.listen():
                    heard = decode(message.get("data", b""))
                    if heard is not None and heard[0] != self.origin:
                        await self.local.publish(heard[1])
            except self.store.errors as exc:
                # Only a failed subscription says the store is down now: a subscription that ends may report
                # an outage that is already over (redis-py retries its reads first); subscribe again to know.
                if not subscribed:
                    self.store.went_down("listen streams", exc)
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await pubsub.aclose()
            if not started:
                started = True
                task_status.started()
            # A store that takes subscriptions and drops them at once must not make this a busy loop.
            await anyio.sleep(RETRY if not subscribed else RESUBSCRIBE_PAUSE)
