"""The route replicas use among themselves (`state_url` set): `/_manifold/held`, where a replica hands the
holder of a call the answers a 2026-07-28 client sent to it. Clients cannot use it: it needs the token the
replicas share, compared in constant time, and answers 404 to anything else (it shows nothing to a guess)."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.shared_state.held import HELD_PATH, TOKEN_HEADER


def replica_routes(gateway: Gateway) -> list[BaseRoute]:
    async def held(request: Request) -> Response:
        forwarding = gateway.shared.forwarding if gateway.shared is not None else None
        if forwarding is None or not forwarding.allowed(request.headers.get(TOKEN_HEADER)):
            return PlainTextResponse("Not Found", status_code=404)
        try:
            body = json.loads(await request.body())
        except ValueError:
            return PlainTextResponse("bad request", status_code=400)
        if not isinstance(body, dict):
            return PlainTextResponse("bad request", status_code=400)
        return JSONResponse(await forwarding.answer(body))

    return [Route(HELD_PATH, held, methods=["POST"])]
