"""The route replicas use among themselves (`state_url` set): `/_manifold/held`, where a replica hands the
holder of a call the answers a 2026-07-28 client sent to it. Clients cannot use it: it needs the token the
replicas share, compared in constant time, and answers 404 to anything else (it shows nothing to a guess).
The answer is streamed, one JSON object per line (the call's progress and logs, then its answer), so the
forwarding replica can send them on to the client while the call runs."""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from mcp_manifold._runtime.gateway import Gateway
from mcp_manifold._runtime.shared_state.held import HELD_PATH, RELAY_BUFFER, TOKEN_HEADER, HeldForwarding


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
        return _HeldAnswer(forwarding, body)

    return [Route(HELD_PATH, held, methods=["POST"])]


class _HeldAnswer(Response):
    """The held call's lines, written as the holder produces them."""

    def __init__(self, forwarding: HeldForwarding, body: dict[str, Any]) -> None:
        self.status_code = 200
        self.background = None
        self.forwarding = forwarding
        self.body_sent = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/x-ndjson")]  # no length: written as the call goes
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        lines, outgoing = anyio.create_memory_object_stream[bytes](RELAY_BUFFER)
        async with anyio.create_task_group() as task_group:
            # The forwarding replica hangs up when its client cancels: the call stops here too, as a local
            # client's cancel stops it.
            task_group.start_soon(_cancel_on_hang_up, receive, task_group.cancel_scope)
            task_group.start_soon(self.forwarding.answer, self.body_sent, lines)
            async with outgoing:
                async for line in outgoing:
                    await send({"type": "http.response.body", "body": line, "more_body": True})
            task_group.cancel_scope.cancel()  # answered: nothing more to watch
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_hang_up(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
