"""`subscriptions/listen` (2026-07-28): the SDK's stream, plus the servers behind the resources it names.

The SDK's `ListenHandler` streams what the gateway publishes on its bus. A resource update is published
only if the server that owns the resource was asked for it, so a stream that names resources
subscribes this client to them for as long as it is open, as `resources/subscribe` does for a
session-era client. A caller with a profile gets only the resources its profile lets it read: the others
are left out of the stream (and of its acknowledgement) exactly as unknown URIs are, so updates of a
resource it may not see never reach it, even while another client subscribes to that resource.

A stream is the 2026-07-28 counterpart of a session's standing GET stream, and costs the gateway about as
much (a connection, a task, the SDK's stream state) for as long as its client keeps it; 2026-07-28 has no
sessions to bound them, so they are bounded here like sessions: `principal_max_sessions` open at once per
authenticated principal (the SDK's handler bounds them all, at 1024). Before, one principal could hold all.

A stream outlives a reload that changes the profiles: an update of a resource the caller may no longer
read (its profile narrowed, or its principal given another profile) is left out of the stream then, as
for a session-era client's subscription (`Access.may_read_resource`). A stream ends when the credential it
was opened with does: its token expires, or a reload removes its API key or revokes its token
(`standing_streams.py`), found out at its next event, or when its principal opens one more past its share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    ListenHandler,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)

from mcp_manifold._core.clients import Request
from mcp_manifold._errors import ManifoldError, NotFound, RateLimited
from mcp_manifold._front.identity import Identity, request_identity
from mcp_manifold._front.standing_streams import credential_still_accepted, stream_scope
from mcp_manifold._runtime.back_channel import MAX_SUBSCRIPTIONS
from mcp_manifold._runtime.gateway import Gateway

logger = logging.getLogger(__name__)


# What the stream being opened in this task may be sent (`_StreamBus`); None: everything.
_admits: ContextVar[Callable[[ServerEvent], bool] | None] = ContextVar("manifold_listen_admits", default=None)


class _StreamBus:
    """The back channel's bus as the SDK's handler sees it: a stream's listener, registered in the task
    serving that stream (synchronously, before its first await), gets only the events `_admits` lets by."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self._bus = bus

    async def publish(self, event: ServerEvent) -> None:
        await self._bus.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        admits = _admits.get()
        if admits is None:
            return self._bus.subscribe(listener)

        def deliver(event: ServerEvent) -> None:
            if admits(event):
                listener(event)

        return self._bus.subscribe(deliver)


class GatewayListenHandler:
    """Serves `subscriptions/listen`, subscribing the stream's resources at their servers meanwhile."""

    def __init__(self, gateway: Gateway, request_of: Any) -> None:
        self._gateway = gateway
        self._request_of = request_of  # ctx -> Request (the front's)
        self._streams = ListenHandler(_StreamBus(gateway.back_channel.bus))
        # authenticated principal -> its streams open now: the scope that ends each, and the credential it came with
        self._open: dict[str, dict[anyio.CancelScope, Identity | None]] = {}

    def _admit(self, principal: str | None, identity: Identity | None, stream: anyio.CancelScope) -> None:
        """Refuse a stream past its principal's share; else count it open. (The SDK's handler bounds them all.)"""
        if principal is not None:
            mine = self._open.setdefault(principal, {})
            limit = self._gateway.settings.principal_max_sessions
            if len(mine) >= limit:
                self._end_unaccepted(mine)
            if len(mine) >= limit:
                raise MCPError(
                    code=INVALID_REQUEST,
                    message=f"subscriptions/listen: principal {principal!r} already has {len(mine)} stream(s) open "
                    f"(principal_max_sessions {limit}); close one first",
                )
            mine[stream] = identity
        self._gateway.back_channel.listen_streams += 1

    def _end_unaccepted(self, mine: dict[anyio.CancelScope, Identity | None]) -> None:
        """End (and stop counting) the streams whose API key a reload removed or whose token it revoked. An idle
        one only found out at its next event, and kept its place meanwhile: a leaked credential's streams kept
        its principal's other key or fresh token from listening, with no end at all for a key's."""
        config = self._gateway.config
        for stream, identity in list(mine.items()):
            if not credential_still_accepted(identity, config):
                stream.cancel()  # it gets its closing result, as at its next event
                del mine[stream]

    def _closed(self, principal: str | None, stream: anyio.CancelScope) -> None:
        self._gateway.back_channel.listen_streams -= 1
        mine = self._open.get(principal) if principal is not None else None
        if mine is not None and principal is not None:
            mine.pop(stream, None)  # already gone if `_end_unaccepted` ended it
            if not mine:
                del self._open[principal]

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        request: Request = self._request_of(ctx)
        principal = request.caller.principal
        identity = request_identity(ctx.request)
        # It ends with its credential, gracefully: a client that still has access listens again.
        stream = stream_scope(identity)
        self._admit(principal, identity, stream)
        try:
            return await self._listen(ctx, params, request, identity, stream)
        finally:
            self._closed(principal, stream)

    async def _listen(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: SubscriptionsListenRequestParams,
        request: Request,
        identity: Identity | None,
        stream: anyio.CancelScope,
    ) -> SubscriptionsListenResult:
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        if len(uris) > MAX_SUBSCRIPTIONS:  # refused whole: a stream that updates some of what it names misleads
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"subscriptions/listen names {len(uris)} resources: "
                f"a stream may name {MAX_SUBSCRIPTIONS} at most",
            )
        restricted = self._gateway.access.profile(request.caller) is not None
        subscribed, unknown = [], []
        servers: dict[str, str] = {}  # a subscribed resource's server
        for uri in uris:
            try:
                servers[uri] = await self._gateway.subscribe(request, uri)
                subscribed.append(uri)
            except RateLimited as exc:  # over the principal's limits: the stream is refused, saying so
                self._gateway.end_subscriptions(request, subscribed)
                raise MCPError(code=INTERNAL_ERROR, message=f"subscriptions/listen failed: {exc}") from None
            except NotFound as exc:  # unknown, or hidden by the caller's profile (the same words)
                logger.info("listen stream: resource %s not subscribed: %s", uri, exc)
                unknown.append(uri)
            except ManifoldError as exc:  # a stream is not refused for one resource; it just never updates
                logger.info("listen stream: resource %s not subscribed: %s", uri, exc)
        if restricted and unknown:
            # The SDK delivers every update of a URI the stream names, whoever subscribed at the server.
            kept = [uri for uri in uris if uri not in unknown] or None
            notifications = params.notifications.model_copy(update={"resource_subscriptions": kept})
            params = params.model_copy(update={"notifications": notifications})
        access, gateway = self._gateway.access, self._gateway

        def admits(event: ServerEvent) -> bool:  # read as each event is published: a reload may change it
            if not credential_still_accepted(identity, gateway.config):
                stream.cancel()
                return False
            if isinstance(event, ResourceUpdated):
                if event.uri in servers:
                    return access.may_read_resource(request.caller, servers[event.uri], event.uri)
                # Named but not subscribed (unknown then, or its subscription failed), so no server to judge it
                # by: only for a caller that may still see everything. Before, once a reload had narrowed the
                # caller's profile, its updates (another client subscribed) still came.
                return access.profile(request.caller) is None and access.holds_profile(request.caller)
            # A list changed: only if the caller may see something that changed (a hidden server's is not its news).
            return gateway.back_channel.concerns(request.caller, event)

        admitting = _admits.set(admits)
        try:
            with stream:
                return await self._streams(ctx, params)
            return SubscriptionsListenResult(_meta={SUBSCRIPTION_ID_META_KEY: ctx.request_id})
        finally:
            _admits.reset(admitting)
            self._gateway.end_subscriptions(request, subscribed)
