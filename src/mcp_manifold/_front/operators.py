"""Operators, a role: who may read what the gateway knows about every server, client and call.

An operator is a principal `auth.operators` names (globs and `claim:NAME=VALUE`, as a profile's
`principals`) or one whose OAuth token carries the operator scope (`auth.oauth.operator_scope`,
default `manifold:operator`). Without authentication (a loopback gateway) every local user is an
operator: anyone who can reach the port can call every tool of every server anyway.

The operator routes (`/metrics`, the dashboard's overview and calls) go through `OperatorsOnly`,
which answers anyone else 403 with the reason and no data. The routes with a view for everyone (the
dashboard's tool list and search) ask `Identity.operator` themselves and otherwise show the caller's
own view, as `tools/list` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_manifold._config.model import AuthConfig
from mcp_manifold._core.profiles import principal_matches
from mcp_manifold._front.identity import SCOPE_KEY, Identity


def is_operator(auth: AuthConfig, principal: str, claims: Mapping[str, Any] | None, scopes: Sequence[str]) -> bool:
    """Whether an authenticated principal (with its token's claims and scopes, if any) is an operator."""
    if claims is not None and auth.oauth is not None and auth.oauth.operator_scope in scopes:
        return True
    return any(principal_matches(matcher, principal, claims or {}) for matcher in auth.operators)


class OperatorsOnly:
    """`app` for operators; everyone else gets 403 and the reason, never the route's data.

    A class, not a function: Starlette would take a function for a request handler, not an ASGI app.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity = scope.get(SCOPE_KEY)
        if scope["type"] != "http" or (isinstance(identity, Identity) and identity.operator):
            await self.app(scope, receive, send)
            return
        who = f"principal {identity.principal!r}" if isinstance(identity, Identity) else "this request"
        description = (
            f"{who} is not an operator: this route is for the principals auth.operators names "
            "and tokens with the operator scope"
        )
        response = JSONResponse(
            {"error": "forbidden", "error_description": description},
            status_code=403,
            headers={"Cache-Control": "no-store"},
        )
        await response(scope, receive, send)
