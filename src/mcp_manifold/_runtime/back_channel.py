"""What goes back to clients that they did not ask for in a response: changes, logs, requests for input.

The back channel knows the gateway's clients (`Caller`s, tracked as they make requests) and routes
to them what backends initiate:

- `list_changed` from a backend re-lists it (the catalog then announces what really changed); a client
  hears of a change to a list only if it has that list, was not told yet since it last listed it, and
  listed it before the change, so ten backends coming up behind a client's first `tools/list` cost it at
  most one notification, and none if that list already shows them; and only if its profile lets it see
  one of the items that changed (the catalog says which: `Catalog.last_change`), on its listen stream too;
  `resources/updated` goes to the clients that subscribed to that URI and may still read it (a reload
  may have changed their profile since);
- a log message goes to the client whose call is running on that backend, else to every client that
  may see that server (a client whose profile hides it never hears of it);
- a request for input (sampling, elicitation, roots) goes to the client whose call is waiting.

Neither a log message nor such a request names the client's call: while calls of several clients are
in flight on one backend, logs are dropped and requests refused with a clear error, rather than sent
to a guessed client (which would show one client another's data).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent

from mcp_manifold._core.catalog import Catalog, Kind
from mcp_manifold._core.clients import Caller, no_client_to_answer
from mcp_manifold._core.suggestions import LONGEST_URI
from mcp_manifold._errors import InvalidRequest
from mcp_manifold._runtime.list_events import changed_items, list_changed, list_kind
from mcp_manifold._runtime.relay_bound import ask_within, log_size, relay
from mcp_manifold._sdk import no_deprecation_warnings

if TYPE_CHECKING:
    from mcp_manifold._runtime.backends import Backend

logger = logging.getLogger(__name__)

_LIST_CHANGED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    }
)

# A subscription costs the gateway its URI for as long as the client stays, and a 2026-07-28 server is sent
# every subscribed URI of its own again at each change (its listen stream names them all): unbounded, one
# client's 2,000 subscriptions of 20,000 characters took the gateway from 85 to 620 MB. Real clients hold a
# handful, and a resource URI longer than a path (4,096 on Linux) is not a resource's name.
MAX_SUBSCRIPTIONS = 256  # per client (a session, or one 2026-07-28 listen stream)
MAX_SUBSCRIBED_URI = LONGEST_URI  # characters (longer ones are quoted cut short in errors too)


def several_clients_waiting(backend: Backend) -> bool:
    """Whether calls of more than one client are in flight on `backend` (its messages are then unattributable)."""
    callers = backend.callers
    return len(callers) > 1 and len({id(request.caller) for request in callers}) > 1


class BackChannel:
    """The gateway's clients and what backends send them; a `BackendHooks` for configured backends."""

    def __init__(
        self,
        catalog: Catalog,
        relist: Callable[[Backend], Awaitable[None]],
        may_see: Callable[[Caller, str], bool] = lambda caller, server: True,
        may_read: Callable[[Caller, str, str], bool] = lambda caller, server, uri: True,
        may_see_item: Callable[[Caller, Kind, str, str], bool] = lambda caller, kind, server, name: True,
    ) -> None:
        self.catalog = catalog
        self._relist = relist  # re-list one backend (run in the background)
        self._may_see = may_see  # whether a client's profile lets it see a server (`Access.may_see_server`)
        self._may_read = may_read  # and read a resource of it (`Access.may_read_resource`)
        self._may_see_item = may_see_item  # and see an item of a list (`Access.may_see_item`)
        # Told at once (before the re-listing starts) of a server that announced a change of its tools.
        self.tools_announced: Callable[[str], None] | None = None
        self.bus = InMemorySubscriptionBus()  # 2026-era clients' subscriptions/listen streams
        self.listen_streams = 0  # of those, open now (the front's listen handler counts them)
        self._callers: weakref.WeakSet[Caller] = weakref.WeakSet()
        self._sole: weakref.ref[Caller] | None = None  # the one client of a stdio gateway, once known
        self._subscriptions: dict[str, weakref.WeakSet[Caller]] = {}
        # Per client holding subscriptions, the URIs it holds.
        self._held: weakref.WeakKeyDictionary[Caller, set[str]] = weakref.WeakKeyDictionary()
        # Told the URIs whose last subscriber went away without unsubscribing, for their servers to be told.
        self.unsubscribed: Callable[[list[str]], None] | None = None
        # Catalog changes are counted; a queued change remembers its count, a list the count it showed. A
        # change reaches clients after it happened (from `run`), so a client that listed in between already
        # has it: without the counts it would be told, and that notice would stand for the next real change.
        self._changes = 0
        self._pending: dict[Kind, int] = {}  # kind -> the count of its latest change not yet announced
        # Of those, the items that changed ((server, exposed name)): a client hears of a change only if it may
        # see one of them. Before, a change behind a client's profile reached it: a hidden server exists and
        # changed. None: not known (a reload, a hub change): every client hears of it.
        self._pending_items: dict[Kind, frozenset[tuple[str, str]] | None] = {}
        self._changed = anyio.Event()
        # Per client, the lists it has and has not been told about since it listed them (coalescing): the
        # change count each list showed.
        self._unannounced: weakref.WeakKeyDictionary[Caller, dict[Kind, int]] = weakref.WeakKeyDictionary()
        self._task_group: anyio.abc.TaskGroup | None = None

    # --- clients --------------------------------------------------------------------------------

    def track(self, caller: Caller) -> None:
        """Note a client that made a request (it hears about changes from now on)."""
        if caller not in self._callers:
            self._callers.add(caller)
            # Forgotten when it goes away, not when it is garbage (a session's caller sits in a cycle).
            ref = weakref.ref(caller)
            caller.on_close(lambda: self._forget(ref))

    def session_callers(self) -> list[Caller]:
        """The session-era clients connected now."""
        return list(self._callers)

    def session_count(self) -> int:
        """How many session-era clients are connected now."""
        return len(self._callers)

    def sole_client(self, caller: Caller) -> None:
        """The gateway has one client (stdio): what servers ask outside any call goes to it."""
        self._sole = weakref.ref(caller)

    def listed(self, caller: Caller, kind: Kind) -> None:
        """`caller` got the current list of `kind`: its next change is worth telling it about."""
        self._unannounced.setdefault(caller, {})[kind] = self._changes

    def _forget(self, ref: weakref.ref[Caller]) -> None:
        caller = ref()
        if caller is not None:
            self._callers.discard(caller)

    def check_subscription(self, caller: Caller, uri: str) -> None:
        """Refuse a subscription past the bounds (`MAX_SUBSCRIPTIONS`, `MAX_SUBSCRIBED_URI`), before its
        server is asked; one the client already holds is always taken again."""
        if len(uri) > MAX_SUBSCRIBED_URI:
            raise InvalidRequest(
                f"resource URI of {len(uri):,} characters: a subscription's URI may have at most {MAX_SUBSCRIBED_URI:,}"
            )
        held = self._held.get(caller, ())
        if len(held) >= MAX_SUBSCRIPTIONS and uri not in held:
            raise InvalidRequest(
                f"this client holds {len(held)} subscriptions, the most one client may hold: unsubscribe from one first"
            )

    def subscribe(self, caller: Caller, uri: str) -> bool:
        """Record `caller`'s subscription to `uri`; True if it is the first one (the backend must be told)."""
        subscribers = self._subscriptions.setdefault(uri, weakref.WeakSet())
        first = not subscribers
        subscribers.add(caller)
        held = self._held.get(caller)
        if held is None:
            # Sessions end without unsubscribing: else each URI stayed here, and at its server, for good.
            held = self._held[caller] = set()
            ref = weakref.ref(caller)
            caller.on_close(lambda: self._subscriber_gone(ref))
        held.add(uri)
        return first

    def _subscriber_gone(self, ref: weakref.ref[Caller]) -> None:
        """A client went away: its subscriptions end, and the URIs nobody else holds go to `unsubscribed`."""
        caller = ref()
        if caller is None:
            return
        released = []
        for uri in self._held.pop(caller, ()):
            subscribers = self._subscriptions.get(uri)
            if subscribers is None:
                continue
            subscribers.discard(caller)
            if not subscribers:
                del self._subscriptions[uri]
                released.append(uri)
        if released and self.unsubscribed is not None:
            self.unsubscribed(released)

    def subscribed(self) -> list[str]:
        """Every resource URI (exposed) some client is subscribed to."""
        return [uri for uri, subscribers in self._subscriptions.items() if subscribers]

    def unsubscribe(self, caller: Caller, uri: str) -> bool:
        """Drop `caller`'s subscription; True if none is left (the backend must be told)."""
        self._held.get(caller, set()).discard(uri)
        subscribers = self._subscriptions.get(uri)
        if subscribers is None:
            return False
        subscribers.discard(caller)
        if subscribers:
            return False
        del self._subscriptions[uri]
        return True

    # --- changes --------------------------------------------------------------------------------

    def catalog_changed(self, kinds: set[Kind]) -> None:
        """A catalog listener: queue the kinds (and the items that changed) for `run`, which tells the clients."""
        last_change = dict(self.catalog.last_change)
        apps = self.catalog.apps_named(last_change.get("tools", ())) if "tools" in kinds else frozenset()
        if apps:
            # A changed tool may be held now (or used again), and its app hidden (or listed) with it: before, its
            # clients heard of their tools only, though their resources changed too.
            kinds = kinds | {"resources"}
            last_change["resources"] = last_change.get("resources", frozenset()) | apps
        self._changes += 1
        self._pending.update(dict.fromkeys(kinds, self._changes))
        for kind in kinds:
            queued = self._pending_items.get(kind, frozenset())
            changed = last_change.get(kind)
            self._pending_items[kind] = None if queued is None or changed is None else queued | changed
        self._changed.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Tell every client what changed, as one task so that notifications never block a handler."""
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            task_status.started()
            while True:
                await self._changed.wait()
                self._changed = anyio.Event()
                changes, self._pending = self._pending, {}
                items, self._pending_items = self._pending_items, {}
                await self._announce(changes, items)

    async def notify_list_changed(self, kinds: set[Kind], caller: Caller | None = None) -> None:
        """Send `list_changed` for `kinds` to one client, or to all of them (and their listen streams).

        A client is told about a list it has, once until it lists it again. A change of one client's own
        lists (a search registered tools for it) is its own doing, never one its list already shows.
        """
        if caller is not None:
            await self._tell(caller, dict.fromkeys(kinds))
            return
        self._changes += 1
        await self._announce(dict.fromkeys(kinds, self._changes))

    async def _announce(
        self, changes: dict[Kind, int], items: Mapping[Kind, frozenset[tuple[str, str]] | None] | None = None
    ) -> None:
        items = items or {}
        await self.publish(set(changes), items)
        for target in list(self._callers):
            await self._tell(
                target, {kind: count for kind, count in changes.items() if self._sees(target, kind, items)}
            )

    async def publish(
        self, kinds: set[Kind], items: Mapping[Kind, frozenset[tuple[str, str]] | None] | None = None
    ) -> None:
        """Tell the listen streams of 2026-07-28 clients that the lists of `kinds` changed (`items`: what
        changed of each, for `concerns`)."""
        items = items or {}
        for kind in sorted(kinds):
            # Each event carries what changed, to this replica's streams and the other replicas' alike. Before,
            # that was read from this back channel while it published: another replica's event was judged by
            # nothing, and reached every stream (a hidden server's change too).
            await self.bus.publish(list_changed(kind, items.get(kind)))

    def concerns(self, caller: Caller, event: ServerEvent) -> bool:
        """Whether a list event concerns `caller` (a listen stream's filter): it may see something that changed."""
        kind = list_kind(event)
        return kind is not None and self._sees(caller, kind, {kind: changed_items(event)})

    def _sees(self, caller: Caller, kind: Kind, items: Mapping[Kind, frozenset[tuple[str, str]] | None]) -> bool:
        changed = items.get(kind)
        return changed is None or any(self._may_see_item(caller, kind, server, name) for server, name in changed)

    async def _tell(self, caller: Caller, changes: Mapping[Kind, int | None]) -> None:
        """Tell `caller` of the changes (kind -> change count, None: now) to lists it has and has not been
        told of, unless it listed them since."""
        unannounced = self._unannounced.get(caller)
        if not unannounced:
            return
        due = {
            kind
            for kind, count in changes.items()
            if kind in unannounced and (count is None or unannounced[kind] < count)
        }
        if due:
            for kind in due:
                del unannounced[kind]
            await caller.notify_list_changed(due)

    # --- what backends initiate (BackendHooks) ---------------------------------------------------

    async def on_server_notification(self, backend: Backend, notification: types.ServerNotification) -> None:
        method = getattr(notification, "method", "")
        if method in _LIST_CHANGED:
            if method == "notifications/tools/list_changed" and self.tools_announced is not None:
                self.tools_announced(backend.name)  # calls to it wait for the listing (runtime/relists.py)
            # Not inline: this runs on the backend's read loop, which must stay free to deliver the listing.
            if self._task_group is not None:
                self._task_group.start_soon(self._relist, backend)
        elif method == "notifications/resources/updated":
            uri = self.catalog.exposed_uri(backend.name, notification.params.uri)  # type: ignore[union-attr]
            if self.catalog.foreign(uri, backend.name):
                # A server without a prefix naming another's resource (`kitchen+kitchen://text`): before, its
                # subscribers heard of an update their server never made.
                logger.debug("%s: resources/updated of another server's resource %s dropped", backend.name, uri)
                return
            await self.bus.publish(ResourceUpdated(uri))
            for subscriber in list(self._subscriptions.get(uri, ())):
                if self._may_read(subscriber, backend.name, uri):  # a reload may have taken it away since
                    await subscriber.send_resource_updated(uri)

    async def on_server_log(self, backend: Backend, params: types.LoggingMessageNotificationParams) -> None:
        name = f"{backend.name}.{params.logger}" if params.logger else backend.name
        if several_clients_waiting(backend):
            # A log message names no request: sending it to one of them would be a guess, and a
            # wrong guess shows one client another's data.
            logger.debug("%s: log message dropped: calls of several clients are in flight", backend.name)
            return
        waiting = backend.current_caller
        if waiting is not None:
            size = log_size(params.data)
            await relay(waiting, size, lambda: waiting.log(params.level, params.data, name), backend.name)
            return
        with no_deprecation_warnings():
            for caller in list(self._callers):
                if self._may_see(caller, backend.name):
                    await caller.log(params.level, params.data, name)

    async def on_server_request(self, backend: Backend, method: str, params: Any) -> Any:
        """Put sampling, elicitation and roots to the client the request is for: the one whose call is
        waiting on `backend`, else the one client the session serves (a per-client session's owner, or
        a stdio gateway's client). Never a guess, and never a request the client did not declare."""
        if several_clients_waiting(backend):
            # Nothing tells whose call this request belongs to; asking the wrong client would show it
            # another's data (and let it answer for them), so the server gets a clear refusal.
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"calls of several clients are in flight on server {backend.name!r}: cannot tell "
                f"which client {method} is for; try again when the other calls are done",
            )
        waiting = backend.current_caller
        if waiting is not None:
            waiting.asked = True  # the result may depend on the answer: not one to reuse for another client
            if method == "roots/list":
                # A server asks for roots whenever they changed (roots/list_changed), not for the call that
                # happens to be in flight, and a client answers at once: given up with that call, the
                # server kept the old roots.
                return await ask_within(waiting, method, lambda: waiting.ask(method, params))
            # For this call: given up if it ends first (else each call could leave questions waiting for good).
            with anyio.CancelScope() as scope:
                forget = backend.asking(waiting, scope)
                try:
                    return await ask_within(waiting, method, lambda: waiting.ask(method, params))
                finally:
                    forget()
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{method}: the call it was asked in has ended, so the client is no longer asked",
            )
        owner = backend.owner() if backend.owner is not None else None
        if owner is None and self._sole is not None:
            owner = self._sole()
        if owner is None:
            return no_client_to_answer(method)
        return await ask_within(owner, method, lambda: owner.ask(method, params))
