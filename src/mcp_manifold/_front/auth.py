"""Who is calling over HTTP: API keys, OAuth 2.1 access tokens (JWT), and the profile each one holds.

`guard(app, config)` is the one place where the HTTP app's routes get wrapped: everything it wraps
(`/mcp` today, `/metrics` and `/ui` beside it) needs a credential when the config has an `auth`
section, except the OAuth protected-resource metadata (RFC 9728), which is how a client finds out
where to log in. It is made of the SDK's auth parts (`mcp.server.auth`): its `BearerAuthBackend`
with our `TokenVerifier`, its `AuthContextMiddleware` (so `get_access_token()` works), its protected-resource
routes. A request without a bearer credential gets a 401 saying how to send one; a token that is given
but fails gets a 401 naming what failed (expired, wrong audience, wrong issuer, bad signature,
malformed), in `WWW-Authenticate` and the body.

After authentication, `Identity` (principal, profile, operator or not) goes into the request's ASGI
scope, where the MCP front picks it up for the client's `Caller` and the operator routes check the
role (`_front/operators.py`). A token's principal is `oauth:<claim>` (its `principal_claim`), an API
key's its bare name: the two name spaces never meet, so no token subject can pass for a key's principal.
Without `auth`, a loopback gateway lets a client pick a profile by URL: `/mcp/p/<profile>` is `/mcp`
with that profile.

JWTs are checked with PyJWT (which the MCP SDK already depends on, with its `crypto` extra): a
small, long-maintained library whose `decode` checks signature, expiry, not-before, issuer and
audience in one call, and whose `PyJWKSet` reads a JWKS.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import jwt
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from pydantic import AnyHttpUrl
from starlette.authentication import AuthenticationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_manifold._config import Config
from mcp_manifold._config.model import ApiKey, AuthConfig, OAuthConfig
from mcp_manifold._core.bounded import BoundedTable
from mcp_manifold._core.profiles import profile_for, token_principal
from mcp_manifold._core.suggestions import quoted, shortened
from mcp_manifold._front.identity import SCOPE_KEY, Identity
from mcp_manifold._front.operators import is_operator
from mcp_manifold._front.standing_streams import ends_with_credential, serve_stream

logger = logging.getLogger(__name__)

PROFILE_PATH = re.compile(r"/mcp/p/(?P<profile>[^/]+)/?\Z")
MCP_PATH = "/mcp"
ROOT_METADATA_PATH = "/.well-known/oauth-protected-resource"
_JWKS_TTL = 300.0  # seconds a fetched JWKS is used before it is fetched again
_JWKS_RETRY = 30.0  # an unknown key id refetches the JWKS at most this often
_JWKS_MAX_BYTES = 1 << 20  # an issuer's key set is a few kB: a longer answer is refused, not read whole
_TOKEN_CACHE = 1024  # verified tokens remembered (until they expire), so each request does not re-verify
_NOT_IN_CHALLENGE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")  # what RFC 6750's error_description may not hold


# --- verifying tokens ---------------------------------------------------------------------------------


class TokenRejected(AuthenticationError):
    """A bearer token was given but does not authenticate; the message says why (never the token)."""

    def __init__(self, description: str, error: str = "invalid_token", status: int = 401) -> None:
        super().__init__(description)
        self.description = description
        self.error = error
        self.status = status


class Principal(AccessToken):
    """An access token with the principal it names (an API key's, or `oauth:` and a token's `principal_claim`)."""

    principal: str


class ApiKeys:
    """Static API keys, kept as SHA-256 digests and compared in constant time."""

    def __init__(self, keys: tuple[ApiKey, ...]) -> None:
        self._keys = [(bytes.fromhex(key.sha256), key.principal) for key in keys]

    def verify(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found = None
        for stored, principal in self._keys:  # every key is compared, so the time says nothing of which matched
            if hmac.compare_digest(digest, stored):
                found = principal
        if found is None:
            return None
        # The token field holds the digest: the key itself is never kept past this point.
        return Principal(token=digest.hex(), client_id=found, scopes=[], subject=found, principal=found)


class JwksKeys:
    """An issuer's signing keys, from its JWKS URL or a file; fetched again when they age or a key id is new."""

    def __init__(self, url: str | None, file: str | None) -> None:
        self.url = url
        self.file = file
        self._keys: dict[str | None, tuple[dict[str, Any], jwt.PyJWK]] = {}  # kid -> its JWK, as PyJWT reads it
        self._fetched = -float("inf")  # when the keys were last loaded
        # When they were last asked for, loaded or not: a failed fetch waits as long as an unknown key id
        # does, or every request (a forged token needs no key) fetched again, one after another.
        self._asked = -float("inf")
        self._lock = anyio.Lock()

    async def key(self, kid: str | None, alg: str) -> Any:
        """The key `kid` names (or the only key, for a token without `kid`), to verify a token signed with `alg`
        (one of the configured algorithms); refetched when unknown or aged."""
        found = self._find(kid)
        now = time.monotonic()
        wanted = now - self._fetched > _JWKS_TTL or found is None
        if wanted and now - self._asked > _JWKS_RETRY:
            asked = self._asked
            async with self._lock:
                if self._asked == asked:  # not asked for by another request meanwhile
                    try:
                        await self._load()
                    finally:
                        self._asked = time.monotonic()
            found = self._find(kid)
        if found is None and not self._keys:
            raise TokenRejected(f"the issuer's keys could not be loaded from {self.url or self.file}")
        if found is None:
            raise TokenRejected(f"the token's signing key ({kid!r}) is not among the issuer's keys")
        jwk, key = found
        if key.algorithm_name == alg or "alg" in jwk or jwk.get("kty") != "RSA":
            return key  # a JWK that names its algorithm is bound to it (PyJWT refuses another); EC's is its curve's
        # RFC 7517 makes `alg` optional (Entra ID's keys have none), and PyJWT takes RS256 for an RSA key that
        # names none: an issuer's RS384, RS512 and PS* tokens were all refused. Such a key is any RSA algorithm.
        try:
            return jwt.PyJWK(jwk, algorithm=alg)
        except jwt.PyJWTError:
            raise TokenRejected(f"the token's signing key ({kid!r}) is not a key for {alg}") from None

    def _find(self, kid: str | None) -> tuple[dict[str, Any], jwt.PyJWK] | None:
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return None

    async def _load(self) -> None:
        source = self.url or self.file
        try:
            document = await self._read()
            if not isinstance(document, dict):
                raise ValueError(f"the key set is {type(document).__name__}, not a JSON object")
            keys = _usable_keys(document, source)
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            logger.warning("could not load the issuer's keys from %s: %s", source, exc)
            return  # keep the keys we had (if any), and ask again after `_JWKS_RETRY`
        self._keys = keys
        self._fetched = time.monotonic()

    async def _read(self) -> Any:
        if self.file is not None:
            return json.loads(await anyio.Path(Path(self.file).expanduser()).read_text())
        import httpx2  # the MCP SDK's HTTP client

        body = bytearray()
        try:
            async with (
                httpx2.AsyncClient(timeout=10.0, follow_redirects=True) as client,
                client.stream("GET", self.url or "") as response,
            ):
                if response.status_code != 200:
                    raise OSError(f"HTTP {response.status_code}")
                async for chunk in response.aiter_bytes():  # decoded as it comes: a compressed bomb stops too
                    body += chunk
                    if len(body) > _JWKS_MAX_BYTES:
                        raise OSError(f"the answer is longer than {_JWKS_MAX_BYTES} bytes")
        except httpx2.HTTPError as exc:  # unreachable, timed out: a refusal, not a 500 for the request
            raise OSError(f"{type(exc).__name__}: {exc}") from None
        return json.loads(body)


def _usable_keys(document: dict[str, Any], source: str | None) -> dict[str | None, tuple[dict[str, Any], jwt.PyJWK]]:
    """A key set's keys by kid, as `jwt.PyJWKSet` reads them (what is no JWK, or no key PyJWT can use, is
    skipped), each kept with its JWK, which `JwksKeys.key` may read again for another algorithm."""
    members = document.get("keys")
    if not isinstance(members, list):
        raise ValueError("the key set has no 'keys' list")
    keys: dict[str | None, tuple[dict[str, Any], jwt.PyJWK]] = {}
    for jwk in members:
        if not isinstance(jwk, dict):
            continue
        kid = jwk.get("kid")
        if kid is not None and not isinstance(kid, str):  # a token's `kid` is a string
            logger.warning("the issuer's key set at %s has a key whose kid is not a string: skipped", source)
            continue
        try:
            keys[kid] = (jwk, jwt.PyJWK(jwk))
        except jwt.PyJWTError:
            continue  # a key type or curve PyJWT cannot use
    if not keys:
        raise ValueError("the key set has no key this gateway can use")
    return keys


_JWT_FAILURES: list[tuple[type[Exception], Callable[[OAuthConfig, Exception], str]]] = [
    (jwt.ExpiredSignatureError, lambda c, e: "the token has expired"),
    (jwt.ImmatureSignatureError, lambda c, e: "the token is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidSignatureError, lambda c, e: "the token's signature does not verify"),
    (jwt.MissingRequiredClaimError, lambda c, e: f"the token has no {getattr(e, 'claim', '')!r} claim"),
    # Its algorithm is one of the configured ones (checked first): this is a key bound to another.
    (jwt.InvalidAlgorithmError, lambda c, e: f"the token's algorithm is not its signing key's: {e}"),
    (jwt.DecodeError, lambda c, e: "the token is not a well-formed JWT"),
]


class JwtVerifier:
    """OAuth 2.1 resource-server checks of a JWT access token: signature, expiry, issuer, audience (RFC 8707)."""

    def __init__(self, config: OAuthConfig) -> None:
        self.config = config
        self.keys = JwksKeys(config.jwks_url, config.jwks_file)

    async def verify(self, token: str) -> Principal:
        config = self.config
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise TokenRejected("the token is neither an API key nor a well-formed JWT") from None
        except jwt.PyJWTError as exc:  # a JWT whose header PyJWT refuses: a `crit` extension it does not know, say
            raise TokenRejected(f"the token's header is refused: {shortened(str(exc), 200)}") from None
        if header.get("alg") not in config.algorithms:
            raise TokenRejected(
                f"the token's algorithm {header.get('alg')!r} is not one of {', '.join(config.algorithms)}"
            )
        key = await self.keys.key(header.get("kid"), header["alg"])
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(config.algorithms),
                audience=list(config.audience),
                issuer=config.issuer,
                leeway=config.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidIssuerError:
            raise TokenRejected(_other_issuer(config, token)) from None
        except jwt.InvalidAudienceError:
            raise TokenRejected(_other_audience(config, token)) from None
        except jwt.PyJWTError as exc:
            raise TokenRejected(_jwt_failure(config, exc)) from None
        expires = claims["exp"]
        # PyJWT takes any `exp` int() reads ("1767225600" too); the expiry kept below and a stream's end need a
        # number: a string one was a 500 with a traceback.
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise TokenRejected(f"the token's 'exp' claim is a {type(expires).__name__}, not a number of seconds")
        principal = claims.get(config.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise TokenRejected(f"the token has no {config.principal_claim!r} claim to name its principal")
        scopes = _scopes(claims)
        missing = [scope for scope in config.required_scopes if scope not in scopes]
        if missing:
            raise TokenRejected(
                f"the token lacks the scope(s) {', '.join(missing)}", error="insufficient_scope", status=403
            )
        return Principal(
            token=hashlib.sha256(token.encode()).hexdigest(),
            client_id=str(claims.get("client_id") or claims.get("azp") or principal),
            scopes=scopes,
            expires_at=int(expires + config.leeway),
            resource=config.audience[0],
            subject=str(claims.get("sub") or principal),
            claims=claims,
            principal=token_principal(principal),
        )


def _other_issuer(config: OAuthConfig, token: str) -> str:
    """Why a token whose signature verified was refused for its `iss`, naming it: an issuer configured
    without the trailing '/' its tokens carry (or with one they lack) was refused with no clue."""
    issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")  # signed by the issuer's key
    said = f"the token was not issued by {config.issuer}: its iss is {quoted(str(issuer))}"
    if isinstance(issuer, str) and issuer.rstrip("/") == config.issuer.rstrip("/"):
        said += " (they differ only in the trailing '/': auth.oauth.issuer must be the iss exactly)"
    return said


def _other_audience(config: OAuthConfig, token: str) -> str:
    """Why a token whose signature verified was refused for its `aud`, naming it (a resource_url written
    without the `/mcp` or the trailing '/' the identity provider puts in its tokens was refused with no clue)."""
    aud = jwt.decode(token, options={"verify_signature": False}).get("aud")
    audience = shortened(", ".join(map(str, aud)) if isinstance(aud, list) else str(aud), 200)
    return f"the token is not for this gateway: its audience must include {config.audience[0]}; its aud is {audience}"


def _jwt_failure(config: OAuthConfig, exc: Exception) -> str:
    for kind, describe in _JWT_FAILURES:
        if isinstance(exc, kind):
            return describe(config, exc)
    return f"the token was refused: {exc}"


def _scopes(claims: dict[str, Any]) -> list[str]:
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return scope.split()
    if isinstance(scope, list):
        return [str(item) for item in scope]
    return []


class Verifier:
    """The SDK's `TokenVerifier`: an API key first, else a JWT of the configured issuer. Raises `TokenRejected`."""

    def __init__(self, keys: ApiKeys, jwts: JwtVerifier | None) -> None:
        self.keys = keys
        self.jwts = jwts
        self._verified: BoundedTable[str, Principal] = BoundedTable(_TOKEN_CACHE)

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self.keys.verify(token)
        if found is not None:
            return found
        if self.jwts is None:
            raise TokenRejected("the API key is not valid")
        cached = self._verified.get(token)
        if cached is not None and (cached.expires_at or 0) > time.time():
            return cached
        verified = await self.jwts.verify(token)
        return self._verified.keep(token, verified)


class CurrentVerifier:
    """The `Verifier` of the running config's `auth`: a reload that adds or removes an API key, or changes
    the token settings, applies from the next request on (`_config/changes.py` says when it cannot)."""

    def __init__(self, config: Callable[[], Config]) -> None:
        self._config = config
        self._auth: AuthConfig | None = None
        self._verifier: Verifier
        self._follow(config().auth)

    async def verify_token(self, token: str) -> AccessToken | None:
        # What follows `Bearer ` and its one space: RFC 6750 allows more spaces before the credential, and a value's
        # trailing white space is not part of it (RFC 9110 §5.5), but the server keeps it: a key pasted with either
        # was refused as "neither an API key nor a well-formed JWT".
        token = token.strip(" \t")
        auth = self._config().auth
        if auth is not self._auth:  # one identity check per request; a reload gives a new object
            self._follow(auth)
        verified = await self._verifier.verify_token(token)
        if isinstance(verified, Principal) and auth.revokes(verified.principal, verified.claims):
            raise TokenRejected("the token was revoked (auth.revoked)")
        return verified

    def _follow(self, auth: AuthConfig) -> None:
        if self._auth is not None and auth.oauth == self._auth.oauth:
            self._verifier.keys = ApiKeys(auth.api_keys)  # the issuer's keys and the verified tokens carry on
        else:
            self._verifier = Verifier(ApiKeys(auth.api_keys), JwtVerifier(auth.oauth) if auth.oauth else None)
        self._auth = auth


# --- the wrap -------------------------------------------------------------------------------------------


def guard(app: ASGIApp, config: Callable[[], Config], open_paths: Callable[[str], bool] | None = None) -> ASGIApp:
    """`app` behind authentication (when configured) and profile selection: where the HTTP routes get wrapped.

    `open_paths` names paths served without a credential (pages that hold no data, such as the dashboard's)."""
    auth = config().auth
    identify: ASGIApp = _Identify(AuthContextMiddleware(app), config)
    if not auth.enabled:
        return _Guard(app, _ProfilePath(identify))
    oauth = auth.oauth
    verifier = CurrentVerifier(config)
    metadata_url = None
    public = Router()
    if oauth is not None and oauth.resource_url:
        resource = AnyHttpUrl(oauth.resource_url)
        metadata_url = build_resource_metadata_url(resource)
        routes = create_protected_resource_routes(
            resource_url=resource,
            authorization_servers=[AnyHttpUrl(oauth.issuer)],
            scopes_supported=list(oauth.required_scopes) or None,
            resource_name="mcp-manifold",
        )
        public.routes.extend(routes)
        if routes[0].path != ROOT_METADATA_PATH:  # also where clients that try the root look (RFC 9728 §3)
            public.routes.append(Route(ROOT_METADATA_PATH, routes[0].endpoint, methods=["GET", "OPTIONS"]))
    # No scopes asked here: `required_scopes` are a token's, which `JwtVerifier` checks (403 insufficient_scope);
    # asked of every credential, they refused each API key (a key carries no scopes) on every route.
    required = _RequireCredential(identify, str(metadata_url) if metadata_url else None)
    authenticated = AuthenticationMiddleware(
        required, backend=BearerAuthBackend(verifier), on_error=_refusal(str(metadata_url) if metadata_url else None)
    )
    return _Guard(app, _ProfilePath(_Public(public, authenticated, app, open_paths)))


class _RequireCredential:
    """A request without a valid credential gets 401, saying how to send one. The SDK's
    `RequireAuthMiddleware` said only "Authentication required", also to a key sent without `Bearer ` or in
    another header, the usual first mistake with a shared gateway. The header's value is never quoted."""

    def __init__(self, app: ASGIApp, metadata_url: str | None) -> None:
        self.app = app
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        how = "'Authorization: Bearer <API key or access token>'"
        if HTTPConnection(scope).headers.get("authorization") is None:
            description = f"no credential was sent: send {how}"
        else:
            description = f"the Authorization header is not a bearer credential: send {how}"
        await _error(401, "invalid_token", description, self.metadata_url)(scope, receive, send)


def _refusal(metadata_url: str | None) -> Callable[[HTTPConnection, AuthenticationError], Response]:
    def refuse(conn: HTTPConnection, exc: AuthenticationError) -> Response:
        rejected = exc if isinstance(exc, TokenRejected) else TokenRejected(str(exc))
        return _error(rejected.status, rejected.error, rejected.description, metadata_url)

    return refuse


def _error(status: int, error: str, description: str, metadata_url: str | None = None) -> Response:
    challenge = f'Bearer error="{error}", error_description="{_challenge_text(description)}"'
    if metadata_url:
        challenge += f', resource_metadata="{metadata_url}"'
    return JSONResponse(
        {"error": error, "error_description": description}, status_code=status, headers={"WWW-Authenticate": challenge}
    )


def _challenge_text(description: str) -> str:
    """`description` as RFC 6750 lets `error_description` be: printable ASCII without `"` or `\\`, each other
    character a `?` (the body keeps it whole). A profile named in the URL, or a principal, can be any text,
    and a header that is not Latin-1 cannot be sent at all: the refusal became a 500 with a traceback."""
    return _NOT_IN_CHALLENGE.sub(lambda found: "'" if found.group() == '"' else "?", description)


class _Guard:
    """HTTP requests go through the checks; the app's lifespan (start-up, shutdown) goes straight to it."""

    def __init__(self, app: ASGIApp, checked: ASGIApp) -> None:
        self.app = app
        self.checked = checked

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (self.checked if scope["type"] in ("http", "websocket") else self.app)(scope, receive, send)


class _Public:
    """Serves the public routes (the protected-resource metadata) and the open paths without a credential;
    the rest goes to `app`."""

    def __init__(
        self, public: Router, app: ASGIApp, unguarded: ASGIApp, open_paths: Callable[[str], bool] | None
    ) -> None:
        self.public = public
        self.paths = {route.path for route in public.routes}  # type: ignore[attr-defined]
        self.app = app
        self.unguarded = unguarded
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            await self.public(scope, receive, send)
        elif scope["type"] == "http" and self.open_paths is not None and self.open_paths(scope["path"]):
            await self.unguarded(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class _ProfilePath:
    """`/mcp/p/<profile>` is `/mcp` with that profile asked for (kept in the scope for `_Identify`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            match = PROFILE_PATH.match(scope["path"])
            if match is not None:
                scope = {
                    **scope,
                    "path": MCP_PATH,
                    "raw_path": MCP_PATH.encode(),
                    "manifold.url_profile": match["profile"],
                }
        await self.app(scope, receive, send)


class _Identify:
    """Turns the authenticated principal (or the URL's profile) into the request's `Identity`, or refuses it."""

    def __init__(self, app: ASGIApp, config: Callable[[], Config]) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        config = self.config()
        asked = scope.get("manifold.url_profile")
        user = scope.get("user")
        if isinstance(user, AuthenticatedUser) and isinstance(user.access_token, Principal):
            token = user.access_token
            principal = token.principal
            operator = is_operator(config.auth, principal, token.claims, token.scopes)
            profile = None
            if config.profiles:
                held = profile_for(config.profiles.values(), principal, token.claims)
                # An operator without a profile may still read the operator routes, never /mcp.
                if held is None and not (operator and not scope["path"].startswith(MCP_PATH)):
                    await _error(403, "access_denied", f"principal {principal!r} holds no profile")(
                        scope, receive, send
                    )
                    return
                profile = held.name if held is not None else None
            if asked is not None and asked != profile:
                message = f"principal {principal!r} holds profile {profile!r}, not {asked!r}: connect to /mcp"
                await _error(403, "access_denied", message)(scope, receive, send)
                return
            key_digest = token.token if token.claims is None else None  # `ApiKeys` keeps only the digest
            identity = Identity(principal, profile, operator, token.claims, key_digest)
        else:
            if asked is not None and asked not in config.profiles:
                known = ", ".join(config.profiles) or "none are configured"
                await _error(404, "unknown_profile", f"unknown profile {asked!r} (profiles: {known})")(
                    scope, receive, send
                )
                return
            identity = Identity(None, asked, operator=True)  # without authentication, every local user is one
        scope[SCOPE_KEY] = identity
        if scope["method"] == "GET" and ends_with_credential(identity) and scope["path"].startswith(MCP_PATH):
            await serve_stream(identity, self.config, self.app, scope, receive, send)  # a session's standing stream
            return
        await self.app(scope, receive, send)
