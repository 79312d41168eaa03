"""A standing stream opened with an expiring token ends when the token does.

A request is authorized when it arrives, and most are answered at once. Two stay open for as long as
their client keeps them: a session-era client's GET stream and a 2026-07-28 `subscriptions/listen`
stream. Both carried what servers send unasked (resource updates, logs, list changes) to their holder
long after its token had expired, which is how an issuer ends someone's access. Each now ends at the
token's `exp`: the GET stream's response is closed, the listen stream gets its closing result (a
graceful end, per the spec). A client that still has access opens it again with a fresh token.

API keys do not expire; a removed one works until restart (docs/security.md).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def token_expiry(claims: Mapping[str, Any] | None) -> float | None:
    """When a token with these claims expires (its `exp`, checked when it was verified), or None."""
    expires = claims.get("exp") if claims is not None else None
    return float(expires) if isinstance(expires, int | float) and not isinstance(expires, bool) else None


def seconds_left(expires: float) -> float:
    return max(0.0, expires - time.time())


async def serve_until(expires: float, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve the request with `app`, ending its response at `expires` (a Unix time) if it is still open."""
    started = ended = False

    async def watched(message: Message) -> None:
        nonlocal started, ended
        if message["type"] == "http.response.start":
            started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            ended = True
        await send(message)

    with anyio.move_on_after(seconds_left(expires)) as deadline:
        await app(scope, receive, watched)
    if not deadline.cancelled_caught or ended:
        return
    if started:  # an open stream: ended, as the client sees any server end one
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    challenge = b'Bearer error="invalid_token", error_description="the token has expired"'
    await send({"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", challenge)]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
