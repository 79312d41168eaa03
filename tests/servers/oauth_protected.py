"""oauth_protected: an MCP server behind OAuth 2.1 bearer tokens, with its own tiny authorization server.

Built on the SDK's `mcp.server.auth` (protected-resource metadata, authorization-server metadata, dynamic
registration, authorize, token with PKCE, refresh) over an in-memory provider that approves every
authorization at once (no login page: the redirect carries the code straight away). The token endpoint
also takes the client-credentials grant for the pre-registered client `machine` / `machine-secret` (the
SDK's token handler does not). Tool `whoami` answers the client id the call's token was issued to.
HTTP only: ``python tests/servers/oauth_protected.py --http PORT`` (``http://127.0.0.1:PORT/mcp``);
``--token-seconds N`` makes its access tokens last N seconds (3600 by default). Refresh tokens rotate:
each works once; with ``--revoke-on-refresh`` a refresh also revokes the client's earlier access tokens.
Every token it ever issued is printed to stderr as ``issued <client_id>`` (never the token itself), and
every refresh it refused for a refresh token spent already as ``refused ...``. With ``--refresh-lock-in
REDIS_PORT`` (a gateway's refresh lock in that Redis) or ``--refresh-lock-files DIR`` (a lock on a
``*.lock`` file in that folder, a data dir's ``oauth``) it also prints, for each refresh, whether a
gateway held its refresh lock then (``refresh with the lock held`` / ``refresh without the lock``).

``--split AS_PORT`` puts the authorization server on an origin of its own: the issuer is
``http://127.0.0.1:AS_PORT``, which the protected-resource metadata names, and the same app answers on both
ports (so a token request sent to the MCP server's origin would work too, and must be caught). Every token
request is printed as ``token request on port N (<grant_type>)``.

``--step-up SCOPE`` adds a tool ``admin`` that needs SCOPE: a call of it with a token without SCOPE is
answered HTTP 403 with ``WWW-Authenticate: Bearer error="insufficient_scope", scope="SCOPE"`` (the spec's
step-up). Every authorization is printed as ``authorized scope=<the scope asked for>``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import fcntl
import functools
import json
import secrets
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import _common  # noqa: F401  (first: this folder has a numbers.py that shadows the standard one)
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.responses import JSONResponse

MACHINE = ("machine", "machine-secret")


class InstantApproval:
    """An authorization server that says yes to everyone, in memory."""

    def __init__(self, token_seconds: int = 3600, revoke_on_refresh: bool = False) -> None:
        self.token_seconds = token_seconds
        self.revoke_on_refresh = revoke_on_refresh
        self.more_scopes: list[str] = []
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if self.more_scopes:  # a client may ask for these later whatever it registered with (a step-up)
            client_info.scope = " ".join(dict.fromkeys([*(client_info.scope or "").split(), *self.more_scopes]))
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        print(f"authorized scope={' '.join(params.scopes or [])}", file=sys.stderr, flush=True)
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(code.code, None)
        return self.issue(client.client_id, code.scopes, code.resource, refresh=True)

    async def load_refresh_token(self, client: OAuthClientInformationFull, token: str) -> RefreshToken | None:
        known = self.refresh.get(token)
        if known is None:
            print("refused a refresh token spent already, or never issued", file=sys.stderr, flush=True)
        return known

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(token.token, None)
        if self.revoke_on_refresh:
            for access in [key for key, known in self.access.items() if known.client_id == client.client_id]:
                del self.access[access]
        return self.issue(client.client_id, scopes or token.scopes, token.resource, refresh=True)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def issue(self, client_id: str, scopes: list[str], resource: str | None, *, refresh: bool) -> OAuthToken:
        access = secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.token_seconds,
            resource=resource,
        )
        refresh_token = None
        if refresh:
            refresh_token = secrets.token_urlsafe(24)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
        print(f"issued {client_id}", file=sys.stderr, flush=True)
        return OAuthToken(
            access_token=access,
            expires_in=self.token_seconds,
            scope=" ".join(scopes) or None,
            refresh_token=refresh_token,
        )


def redis_lock_held(redis_port: int) -> bool:
    """Whether a gateway holds a refresh lock (`manifold:oauth-refresh:*`) in the Redis on `redis_port`."""
    pattern = b"manifold:oauth-refresh:*"
    command = b"*2\r\n$4\r\nKEYS\r\n$%d\r\n%s\r\n" % (len(pattern), pattern)
    with socket.create_connection(("127.0.0.1", redis_port), timeout=5) as sock:
        sock.sendall(command)
        return not sock.recv(65536).startswith(b"*0")


def file_lock_held(folder: Path) -> bool:
    """Whether some process holds the lock (`flock`) on a `*.lock` file in `folder`."""
    for lock in folder.glob("*.lock"):
        with lock.open("rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
    return False


def client_credentials(provider: InstantApproval, app: Any, lock_held: Callable[[], bool] | None = None) -> Any:
    """The ASGI app with the client-credentials grant added to its token endpoint."""

    async def gated(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await whole_body(receive)
        form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
        print(f"token request on port {scope['server'][1]} ({form.get('grant_type')})", file=sys.stderr, flush=True)
        if lock_held is not None and form.get("grant_type") == "refresh_token":
            held = "with the lock held" if lock_held() else "without the lock"
            print(f"refresh {held}", file=sys.stderr, flush=True)
        if form.get("grant_type") != "client_credentials":
            await app(scope, replayed(body, receive), send)
            return
        client_id, secret = form.get("client_id"), form.get("client_secret")
        headers = dict(scope["headers"])
        basic = headers.get(b"authorization", b"").decode()
        if basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
        if (client_id, secret) != MACHINE:
            response = JSONResponse({"error": "invalid_client"}, status_code=401)
        else:
            scopes = (form.get("scope") or "").split()
            token = provider.issue(client_id, scopes, form.get("resource"), refresh=False)
            response = JSONResponse(token.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})
        await response(scope, receive, send)

    return gated


def step_up(provider: InstantApproval, app: Any, scope_needed: str, resource_metadata: str) -> Any:
    """The ASGI app with its tool `admin` refused 403 insufficient_scope to a token without `scope_needed`."""

    async def gated(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await whole_body(receive)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        called = request.get("params") or {} if isinstance(request, dict) else {}
        if isinstance(request, dict) and request.get("method") == "tools/call" and called.get("name") == "admin":
            bearer = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
            known = provider.access.get(bearer)
            if known is not None and scope_needed not in known.scopes:
                challenge = f'Bearer error="insufficient_scope", scope="{scope_needed}", '
                challenge += f'resource_metadata="{resource_metadata}"'
                print(f"step-up asked for {scope_needed}", file=sys.stderr, flush=True)
                response = JSONResponse(
                    {"error": "insufficient_scope"}, status_code=403, headers={"WWW-Authenticate": challenge}
                )
                await response(scope, receive, send)
                return
        await app(scope, replayed(body, receive), send)

    return gated


async def whole_body(receive: Any) -> bytes:
    """A request's body, read whole from the ASGI `receive`."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def replayed(body: bytes, receive: Any) -> Any:
    """An ASGI `receive` that gives the app `body` (already read), then what `receive` gives."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, required=True, metavar="PORT")
    parser.add_argument("--token-seconds", type=int, default=3600, metavar="N")
    parser.add_argument("--revoke-on-refresh", action="store_true")
    parser.add_argument("--split", type=int, metavar="AS_PORT")
    parser.add_argument("--refresh-lock-in", type=int, metavar="REDIS_PORT")
    parser.add_argument("--refresh-lock-files", type=Path, metavar="DIR")
    parser.add_argument("--step-up", metavar="SCOPE")
    args = parser.parse_args()
    port = args.http
    base = f"http://127.0.0.1:{port}"
    issuer = f"http://127.0.0.1:{args.split}" if args.split else base
    provider = InstantApproval(args.token_seconds, args.revoke_on_refresh)
    if args.step_up:  # the SDK's authorize handler allows a client only the scopes it registered with
        provider.more_scopes = ["read", args.step_up]
    server = MCPServer(
        "oauth_protected",
        version="1.0.0",
        log_level="WARNING",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The client id the call's access token was issued to."""
        token = get_access_token()
        return token.client_id if token is not None else "nobody"

    if args.step_up:

        @server.tool()
        def admin() -> str:
            """A tool that needs the --step-up scope: answers the scopes of the call's token."""
            token = get_access_token()
            return " ".join(token.scopes) if token is not None else "nobody"

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    lock_held = None
    if args.refresh_lock_in is not None:
        lock_held = functools.partial(redis_lock_held, args.refresh_lock_in)
    elif args.refresh_lock_files is not None:
        lock_held = functools.partial(file_lock_held, args.refresh_lock_files)
    app = client_credentials(provider, app, lock_held)
    if args.step_up:
        app = step_up(provider, app, args.step_up, f"{base}/.well-known/oauth-protected-resource/mcp")
    ports = [port] + ([args.split] if args.split else [])
    # The lifespan (the MCP sessions' manager) runs once, with the first server.
    servers = [
        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=p, log_level="warning", lifespan=life))
        for p, life in zip(ports, ["auto", "off"], strict=False)
    ]

    async def serve_all() -> None:
        await asyncio.gather(*(one.serve() for one in servers))

    asyncio.run(serve_all())


if __name__ == "__main__":
    main()
