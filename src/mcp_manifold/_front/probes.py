"""Health probes for balancers and Kubernetes: `/healthz` (the process answers) and `/readyz` (it can serve).

Both are served without a credential and hold no data: a status code and one word. `/readyz` answers 503
while an eager server is still being listed for the first time or while the shared state (`state_url`)
cannot be reached; a balancer then sends requests to the other replicas.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Route

from mcp_manifold._runtime.gateway import Gateway

PROBE_PATHS = frozenset({"/healthz", "/readyz"})


def probe_routes(gateway: Gateway) -> list[BaseRoute]:
    async def alive(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def ready(_request: Request) -> PlainTextResponse:
        if await gateway.ready():
            return PlainTextResponse("ready")
        return PlainTextResponse("not ready", status_code=503)

    return [Route("/healthz", alive, methods=["GET", "HEAD"]), Route("/readyz", ready, methods=["GET", "HEAD"])]
