"""oauth_hostile: a remote MCP server that is also its own hostile authorization server, for the OAuth tests.

``python tests/servers/oauth_hostile.py --http PORT --log FILE [options]``. Every request it gets is
appended to FILE as a JSON line (method, path, authorization header, body), so a test can tell what the
gateway sent where. ``/mcp`` answers every request 401 with ``resource_metadata`` naming ``--prm-url``
(default: its own ``/prm``). Its protected-resource metadata names ``--as-url`` as the authorization server
(default: itself); its authorization-server metadata names ``--token-url`` and ``--registration-url``
(default: its own ``/token`` and ``/register``). Registration gives any client ``hostile-client``; the
authorization page redirects at once with a code and the state it was given.

- ``--prm MODE``: ``ok``, ``huge`` (valid JSON padded to ``--huge-mb`` MB), ``malformed``
  (``authorization_servers`` a string);
- ``--token MODE``: ``ok`` (tokens ``hostile-access``/``hostile-refresh``, ``expires_in`` the JSON text of
  ``--expires-in``, 3600 by default), ``hang`` (never answers),
  ``trickle`` (a 200 whose body comes a byte every 2 seconds, for ever),
  ``error`` (400 with a body that is not UTF-8 and carries ``HOSTILE-BODY``), ``html`` (200, a web page
  carrying ``HOSTILE-BODY``);
- ``/internal/...``: 403 with ``INTERNAL-ONLY`` in the body (an address a remote party should not reach).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route


def build(args: argparse.Namespace) -> Starlette:
    base = f"http://127.0.0.1:{args.http}"

    async def record(request: Request) -> bytes:
        body = await request.body()
        entry = {
            "method": request.method,
            "path": request.url.path,
            "authorization": request.headers.get("authorization"),
            "body": body.decode("latin-1")[:2000],
        }
        with open(args.log, "a") as log:
            log.write(json.dumps(entry) + "\n")
        return body

    async def mcp(request: Request) -> Response:
        await record(request)
        challenge = f'Bearer resource_metadata="{args.prm_url or base + "/prm"}"'
        return Response(status_code=401, headers={"WWW-Authenticate": challenge})

    async def prm(request: Request) -> Response:
        await record(request)
        servers = [args.as_url or base]
        if args.prm == "malformed":
            return JSONResponse({"resource": f"{base}/mcp", "authorization_servers": servers[0]})
        if args.prm == "huge":

            async def padded() -> AsyncIterator[bytes]:
                yield json.dumps({"resource": f"{base}/mcp", "authorization_servers": servers})[:-1].encode()
                for _ in range(args.huge_mb):
                    yield b" " * (1024 * 1024)
                yield b"}"

            return StreamingResponse(padded(), media_type="application/json")
        return JSONResponse({"resource": f"{base}/mcp", "authorization_servers": servers})

    async def metadata(request: Request) -> Response:
        await record(request)
        return JSONResponse(
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": args.token_url or f"{base}/token",
                "registration_endpoint": args.registration_url or f"{base}/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def register(request: Request) -> Response:
        asked = json.loads(await record(request) or b"{}")
        return JSONResponse({**asked, "client_id": "hostile-client", "token_endpoint_auth_method": "none"}, 201)

    async def authorize(request: Request) -> Response:
        await record(request)
        query = request.query_params
        answer = urlencode({"code": "hostile-code", "state": query.get("state", "")})
        return RedirectResponse(f"{query['redirect_uri']}?{answer}", 302)

    async def token(request: Request) -> Response:
        await record(request)
        if args.token == "hang":
            await asyncio.sleep(3600)
        if args.token == "trickle":

            async def slowly() -> AsyncIterator[bytes]:
                while True:
                    yield b" "
                    await asyncio.sleep(2)

            return StreamingResponse(slowly(), media_type="application/json")
        if args.token == "html":
            return Response(b"<html>HOSTILE-BODY</html>", media_type="text/html")
        if args.token == "error":
            return Response(b"\xff\xfe HOSTILE-BODY \xff", status_code=400, media_type="application/json")
        tokens = {"access_token": "hostile-access", "token_type": "Bearer", "refresh_token": "hostile-refresh"}
        expires_in = args.expires_in or "3600"  # JSON text, as it is: a number of any size
        return Response(
            json.dumps(tokens)[:-1].encode() + f', "expires_in": {expires_in}}}'.encode(), media_type="application/json"
        )

    async def internal(request: Request) -> Response:
        await record(request)
        return PlainTextResponse("INTERNAL-ONLY: a secret of the internal network", status_code=403)

    return Starlette(
        routes=[
            Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
            Route("/prm", prm),
            Route("/.well-known/oauth-protected-resource", prm),
            Route("/.well-known/oauth-protected-resource/mcp", prm),
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/internal/{rest:path}", internal, methods=["GET", "POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, required=True, metavar="PORT")
    parser.add_argument("--log", required=True)
    parser.add_argument("--prm-url")
    parser.add_argument("--as-url")
    parser.add_argument("--token-url")
    parser.add_argument("--registration-url")
    parser.add_argument("--prm", choices=["ok", "huge", "malformed"], default="ok")
    parser.add_argument("--huge-mb", type=int, default=5)
    parser.add_argument("--expires-in")
    parser.add_argument("--token", choices=["ok", "hang", "trickle", "error", "html"], default="ok")
    args = parser.parse_args()
    uvicorn.run(build(args), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
