"""HTTP: how many session-era sessions one principal may keep open (`principal_max_sessions`).

`max_http_sessions` bounds every client's sessions together, so one credential could open them all (and
keep them alive with a request now and then) and every other client would get 503 `Too many open
sessions` until they idle out. This wrapper gives each authenticated principal a share: a request that
would open a session (no `mcp-session-id`, and a session-era protocol version or none, which is what the
SDK opens a session for) is refused with 429 once its principal holds its share, before the SDK sees it.
Clients that did not authenticate (loopback) are one local user and share the whole of `max_http_sessions`.
A session opened with an API key a reload has since removed, or with a token it has since revoked
(`auth.revoked`), is not counted: no request can use it any more, and before, a leaked credential's sessions
kept its principal from opening any with its other key or a fresh token until they idled out
(`session_idle_timeout`, 30 minutes by default).

Requests that name a session, and 2026-07-28 requests (no sessions), pass after one look at their headers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._config.model import AuthConfig
from mcp_manifold._front.identity import SCOPE_KEY, Identity
from mcp_manifold._front.json_answers import send_error
from mcp_manifold._sdk import session_is_open

logger = logging.getLogger(__name__)

_SESSION_ID = b"mcp-session-id"
_PROTOCOL_VERSION = b"mcp-protocol-version"
_HANDSHAKE_VERSIONS = frozenset(version.encode() for version in HANDSHAKE_PROTOCOL_VERSIONS)
_PRINCIPALS_KEPT = 1024  # past it, principals with no open session are forgotten


class SessionQuota:
    """At most `limit` open HTTP sessions per authenticated principal, in front of the SDK's session manager."""

    def __init__(self, app: ASGIApp, manager: object, limit: int, auth: Callable[[], AuthConfig]) -> None:
        self.app = app
        self.manager = manager
        self.limit = limit
        self.auth = auth  # the running config's, for the API keys still configured
        # principal -> the sessions it opened (some may be gone), each with the identity it opened them with (its
        # API key's digest or its token's claims)
        self._sessions: dict[str, dict[str, Identity]] = {}
        self._opening: dict[str, int] = {}  # principal -> its requests that may open a session, being served
        if session_is_open(manager, "") is None:  # said once, at start, not found out from a flood
            logger.warning(
                "principal_max_sessions (%d) is not enforced: this mcp version's session manager does not let "
                "the gateway tell which HTTP sessions are open",
                limit,
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity = self._opener(scope)
        if identity is None or identity.principal is None:
            await self.app(scope, receive, send)
            return
        principal = identity.principal
        held = self._open_count(principal) + self._opening.get(principal, 0)
        if held >= self.limit:
            await _refuse(send, principal, held, self.limit)
            return
        self._opening[principal] = self._opening.get(principal, 0) + 1
        opening = True

        def opened() -> None:
            nonlocal opening
            if opening:  # counted once: the SDK may still be finishing the request when the session is noted
                opening = False
                left = self._opening[principal] - 1
                if left:
                    self._opening[principal] = left
                else:
                    del self._opening[principal]

        async def noting_the_session(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()) if message["status"] < 400 else ():
                    if name == _SESSION_ID:
                        self._keep(principal, value.decode("latin-1"), identity)
                opened()
            await send(message)

        try:
            await self.app(scope, receive, noting_the_session)
        finally:
            opened()

    def _opener(self, scope: Scope) -> Identity | None:
        """Who makes a request the SDK would open a session for, if it authenticated; None for any other request."""
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            return None
        identity = scope.get(SCOPE_KEY)
        if not isinstance(identity, Identity) or identity.principal is None:
            return None
        version_read = False
        for name, value in scope["headers"]:
            if name == _SESSION_ID:
                return None
            if name == _PROTOCOL_VERSION and not version_read:
                # Only the first, as the SDK reads it: a 2026-07-28 one sent after a session-era one made the
                # request look like no opener here while the SDK opened a session for it, past the share.
                version_read = True
                if value not in _HANDSHAKE_VERSIONS:
                    return None
        return identity

    def _open_count(self, principal: str) -> int:
        """How many of the sessions `principal` opened are open still (those that ended are forgotten)."""
        sessions = self._sessions.get(principal)
        if not sessions:
            return 0
        auth = self.auth()
        for session_id, opener in list(sessions.items()):
            is_open = session_is_open(self.manager, session_id)
            if is_open is None:  # the SDK no longer lets this be told: no share is enforced
                return 0
            if not is_open or not auth.still_accepts(principal, opener.claims, opener.key_digest):
                del sessions[session_id]  # ended, its key removed or its token revoked: no request can use it
        return len(sessions)

    def _keep(self, principal: str, session_id: str, opener: Identity) -> None:
        if principal not in self._sessions and len(self._sessions) >= _PRINCIPALS_KEPT:
            for other in [other for other in self._sessions if not self._open_count(other)]:
                del self._sessions[other]
        self._sessions.setdefault(principal, {})[session_id] = opener


async def _refuse(send: Send, principal: str, held: int, limit: int) -> None:
    message = (
        f"principal {principal!r} already has {held} open session(s) (principal_max_sessions {limit}); "
        "end one (HTTP DELETE with its mcp-session-id) or let one idle out, then open another"
    )
    await send_error(send, 429, -32600, message)
