"""A standing stream ends when the credential it was opened with does.

A request is authorized when it arrives, and most are answered at once. Two stay open for as long as
their client keeps them: a session-era client's GET stream and a 2026-07-28 `subscriptions/listen`
stream. Both carried what servers send unasked (resource updates, logs, list changes) to their holder
after its token had expired (which is how an issuer ends someone's access), or after a reload had
taken its API key out of the config (a leaked key revoked). Now a stream ends:

- at its token's `exp`;
- before anything more is sent on it, once its API key is no longer configured, or names another
  principal, or its token is revoked (`auth.revoked`); an idle GET stream finds out at its next
  keep-alive ping.

The GET stream's response is closed; the listen stream gets its closing result (a graceful end, per
the spec). A client that still has access opens it again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_manifold._config import Config
from mcp_manifold._front.identity import Identity


def token_expiry(claims: Mapping[str, Any] | None) -> float | None:
    """When a token with these claims expires (its `exp`, checked when it was verified), or None."""
    expires = claims.get("exp") if claims is not None else None
    return float(expires) if isinstance(expires, int | float) and not isinstance(expires, bool) else None


def stream_scope(identity: Identity | None) -> anyio.CancelScope:
    """A scope that ends a stream at its token's expiry (never, without one)."""
    expires = token_expiry(identity.claims) if identity is not None else None
    left = math.inf if expires is None else max(0.0, expires - time.time())
    return anyio.CancelScope(deadline=anyio.current_time() + left)


def credential_still_accepted(identity: Identity | None, config: Config) -> bool:
    """Whether the credential a request came with is still accepted by the running config: its API key still
    there, naming the same principal (a key a reload gave to another principal would otherwise keep its open
    streams acting as the old one: its profile, its share of the limits), or its token not revoked."""
    if identity is None or identity.principal is None:
        return True
    return config.auth.still_accepts(identity.principal, identity.claims, identity.key_digest)


def ends_with_credential(identity: Identity) -> bool:
    """Whether a stream this identity opens can outlive its credential: a token's, or an API key's."""
    return identity.key_digest is not None or token_expiry(identity.claims) is not None


async def serve_stream(
    identity: Identity, config: Callable[[], Config], app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve a GET stream with `app`, closing its response when the credential ends (see the module)."""
    started = ended = False
    with stream_scope(identity) as stream:

        async def watched(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                if not credential_still_accepted(identity, config()):
                    stream.cancel()  # nothing more goes out: the app stops at this checkpoint
                    await anyio.lowlevel.checkpoint()
                ended = not message.get("more_body", False)
            await send(message)

        await app(scope, receive, watched)
    if not stream.cancelled_caught or ended:
        return
    if started:  # an open stream: ended, as the client sees any server end one
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    challenge = b'Bearer error="invalid_token", error_description="the credential has expired or was removed"'
    await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", challenge)]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
