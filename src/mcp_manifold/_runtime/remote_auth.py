"""OAuth to remote servers: the gateway as an OAuth client, with the SDK's client auth doing the protocol.

`mcp.client.auth` does discovery (RFC 9728 protected-resource metadata, RFC 8414 authorization-server
metadata), PKCE, dynamic registration or a client ID metadata document, scope selection and step-up,
and refresh; `ClientCredentialsOAuthProvider` the client-credentials grant. This module gives them what
they need from the gateway: where the tokens are kept (a file per server in the data dir, 0600; with
`state_url`, a record per server in the shared state store, where every replica uses and refreshes the
same ones, refreshes taken in turn: see shared_tokens.py; never logged or shown), the server's
`auth` config, and for the authorization-code grant a person: `login` opens the browser (Python's
`webbrowser`, so `BROWSER` is honoured) and takes the redirect on a loopback port.

`serve` never waits for a person: a server whose authorization needs one fails to start at once, with
the command to run in its last error (`manifold servers`) and in the tool error a client gets.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import re
import secrets
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.utils import extract_field_from_www_auth, issuers_match, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
)
from mcp_types import INTERNAL_ERROR
from pydantic import PrivateAttr, ValidationError

from mcp_manifold._config import Config, ServerConfig
from mcp_manifold._errors import BackendStartError, InvalidRequest, ManifoldError, NotFound
from mcp_manifold._files import atomic_write, private_dir
from mcp_manifold._runtime.file_turns import file_turn
from mcp_manifold._runtime.oauth_issuer import as_stored, look_up, origin_metadata, same_issuer, stored_metadata
from mcp_manifold._runtime.oauth_requests import (
    Guard,
    OAuthRequestFailed,
    Sent,
    is_local_url,
    printable,
    unanswered,
)

logger = logging.getLogger(__name__)

_CALLBACK_PATH = "/callback"
_CLIENT_NAME = "mcp-manifold"


def login_command(server: str) -> str:
    return f"manifold auth login {server}"


class LoginNeeded(BackendStartError):
    """A server's authorization needs a person (no tokens yet, or they can no longer be refreshed)."""

    def __init__(self, server: str) -> None:
        super().__init__(server, login_words(server))


def login_words(server: str) -> str:
    return f"needs an OAuth login: run `{login_command(server)}`"


# --- where tokens are kept --------------------------------------------------------------------------


def token_key(config: ServerConfig) -> str:
    """The name `config`'s tokens are kept under: the server's name and a hash of its name and URL (a new
    URL never reuses old tokens)."""
    key = hashlib.sha256(f"{config.name}\0{config.url}".encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", config.name)[:40]
    return f"{safe}-{key}"


def token_path(data_dir: str | Path, config: ServerConfig) -> Path:
    """Where `config`'s tokens live without shared state: one file per server in the data dir."""
    return Path(data_dir) / "oauth" / f"{token_key(config)}.json"


class Place(Protocol):
    """Where one server's token record is kept: a file, or the shared state store."""

    async def load(self) -> dict[str, Any]: ...

    async def save(self, fields: dict[str, Any]) -> None: ...

    def refresh_turn(self) -> AbstractAsyncContextManager[None]: ...

    def where(self) -> str: ...


class TokenFilePlace:
    """One JSON file (0600, in a 0700 folder). Refreshes are taken in turn by every session and process
    that uses it: a lock on the file beside it, `<token file>.lock` (see file_turns.py)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable OAuth token file %s: %s", self.path, type(exc).__name__)
            return {}
        return data if isinstance(data, dict) else {}

    async def save(self, fields: dict[str, Any]) -> None:
        data = {**await self.load(), **fields}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data))

    def refresh_turn(self) -> AbstractAsyncContextManager[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return file_turn(self.path.with_suffix(".lock"), str(self.path))

    def where(self) -> str:
        return str(self.path)


class StoredTokens:
    """The SDK's `TokenStorage` on a `Place`: the tokens, when the access token expires, the authorization
    server they were issued by (`oauth_issuer`), and the registered client. Never logged or shown."""

    def __init__(self, place: Place, configured_client: OAuthClientInformationFull | None = None) -> None:
        self.place = place
        self.configured = configured_client  # a pre-registered client from the config, used when none is stored
        # The authorization server the tokens being stored come from (the provider's, set by `oauth_provider`).
        self.issued_by: Callable[[], OAuthMetadata | None] = lambda: None
        # False in a process that cannot complete a login (`serve`): a client it registers is not kept, so a
        # server that leads it to another authorization server cannot replace the one a login registered.
        self.keep_registrations = True
        # True in a login that must authorize anew (the stored tokens lack a scope asked for): they are not used.
        self.passed_over = False

    async def get_tokens(self) -> OAuthToken | None:
        if self.passed_over:
            return None
        try:
            raw = (await self.place.load()).get("tokens")
            return OAuthToken.model_validate(raw) if raw else None
        except ValidationError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        # The SDK knows when a token expires only in the process that got it: kept, so every process knows.
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        server = self.issued_by()
        fields: dict[str, Any] = {
            "tokens": tokens.model_dump(mode="json", exclude_none=True),
            "expires_at": expires_at,
            "authorization_server": as_stored(server) if server is not None else None,
        }
        if not _missing(await self.wanted_scope(), tokens.scope):
            fields["scope_wanted"] = None  # granted now: a later login need not ask for it again
        await self.place.save(fields)

    async def wanted_scope(self) -> str | None:
        """The scope a server asked for that the tokens lack (a step-up `serve` could not make without a
        person): `manifold auth login` asks for it."""
        wanted = (await self.place.load()).get("scope_wanted")
        return wanted if isinstance(wanted, str) and wanted else None

    async def want_scope(self, scope: str) -> None:
        kept = await self.wanted_scope()
        if _missing(scope, kept):  # written once, not on every call that is refused for it
            await self.place.save({"scope_wanted": union_scopes(kept, scope)})

    async def record(self) -> tuple[OAuthToken | None, float | None, OAuthMetadata | None]:
        """The stored tokens, when their access token expires, and the authorization server they came from."""
        if self.passed_over:
            return None, None, None
        record = await self.place.load()
        try:
            tokens = OAuthToken.model_validate(record["tokens"]) if record.get("tokens") else None
        except ValidationError:
            return None, None, None
        expires_at = record.get("expires_at")
        expiry = float(expires_at) if isinstance(expires_at, int | float) else None
        return tokens, expiry, stored_metadata(record.get("authorization_server"))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return await self.stored_client() or self.configured

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if not self.keep_registrations:
            logger.info("not keeping a client registered without a login (%s)", self.place.where())
            return
        await self.place.save({"client": client_info.model_dump(mode="json", exclude_none=True)})

    async def stored_client(self) -> OAuthClientInformationFull | None:
        """The client registered earlier (not the configured one), if any."""
        try:
            raw = (await self.place.load()).get("client")
            return OAuthClientInformationFull.model_validate(raw) if raw else None
        except ValidationError:
            return None

    async def has_tokens(self) -> bool:
        tokens = (await self.place.load()).get("tokens")
        return isinstance(tokens, dict) and bool(tokens.get("access_token") or tokens.get("refresh_token"))


class TokenFile(StoredTokens):
    """The tokens kept in the file at `path`."""

    def __init__(self, path: Path, configured_client: OAuthClientInformationFull | None = None) -> None:
        super().__init__(TokenFilePlace(path), configured_client)
        self.path = path


@asynccontextmanager
async def token_storage(
    config: ServerConfig, data_dir: str | Path, state_url: str | None
) -> AsyncIterator[StoredTokens]:
    """Where `config`'s tokens are kept: the shared state store when `state_url` is set (every replica uses
    and refreshes the same ones), else a file in the data dir."""
    if state_url is None:
        private_dir(Path(data_dir))  # `manifold auth login` may be the first to make it: 0700, as `serve` does
        yield TokenFile(token_path(data_dir, config))
        return
    from mcp_manifold._runtime.shared_tokens import shared_token_fields

    async with shared_token_fields(state_url, token_key(config)) as place:
        yield StoredTokens(place)


class _SharedRefresh:
    """What the SDK's providers get from the gateway on top of their flow, for tokens that other processes
    (replicas, a `manifold auth login`) also use and renew:

    - when a stored access token expires (the SDK knows that only in the process that got it), so an
      expired one is refreshed before it is sent;
    - the authorization server the stored tokens came from (`oauth_issuer`), so a refresh goes there and
      never to the MCP server's own origin; tokens are only used with the issuer they were issued by;
    - refreshes taken in turn: before refreshing, the provider waits for its place's refresh turn and reads
      the stored tokens again; another process may have refreshed already (with a rotating refresh token
      only the first use of it works), and then its tokens are used instead;
    - a 401 to a token that is no longer the stored one (another process refreshed, and the server revoked
      the old token; or a new login) is answered by sending the request once more with the stored token,
      before the SDK's flow would start an authorization from scratch (which needs a person);
    - every request of the flow itself held to `oauth_requests.Guard`'s rules.
    """

    context: Any
    _initialized: bool
    guard: Guard
    configured_issuer: str | None = None  # `auth.issuer`: the only authorization server the client may use
    person_at_hand = True  # False in `serve` with the authorization-code grant: a step-up there waits for a login
    # Set once the server has answered a request of this session (it started): a login needed from then on
    # refuses the call, not the session (see `_login_waits`).
    _answered = False
    # While a login is needed mid-life (`_login_waits`): the stored access token then; a call first looks
    # for newer tokens (a login since) and, until there are, is refused without an OAuth request.
    _waiting_on: str | None = None

    @property
    def needs_login(self) -> bool:
        """Whether its calls are refused until a login (`_login_waits`): operator views show it, not only the log."""
        return self._waiting_on is not None

    def _bound_issuer(self) -> str | None:
        """The issuer the client's tokens must come from: the configured one, else the stored client's."""
        client = self.context.client_info
        return self.configured_issuer or (client.issuer if client is not None else None)

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        tokens, expires_at, server = await self.context.storage.record()
        if tokens is None or self.context.current_tokens is None:
            return
        expected = self._bound_issuer()
        if server is not None and expected is not None and not same_issuer(server, expected):
            logger.warning(
                "server %r: its stored tokens come from %s, not %s: not used",
                self.guard.server,
                server.issuer,
                expected,
            )
            self.context.clear_tokens()
            return
        if server is None and tokens.refresh_token:  # kept before the authorization server was kept with them
            server = await look_up(expected, self.context.server_url, self.guard) if expected is not None else None
            if server is None:
                logger.warning(
                    "server %r: the authorization server of its stored tokens is unknown: they are not refreshed "
                    "(run `%s` when they expire)",
                    self.guard.server,
                    login_command(self.guard.server),
                )
                tokens = tokens.model_copy(update={"refresh_token": None})
        self._take(tokens, expires_at, server)

    def _take(self, tokens: OAuthToken, expires_at: float | None, server: OAuthMetadata | None) -> None:
        """Use `tokens`, and refresh them at `server` (the SDK would otherwise use the MCP server's origin)."""
        if server is not None:
            self.context.oauth_metadata = server
            self.context.auth_server_url = str(server.issuer)
        self.context.current_tokens = tokens
        if expires_at is not None:
            margin = min(_EXPIRY_MARGIN, int(tokens.expires_in or 0) / 10)
            self.context.token_expiry_time = expires_at - margin

    async def _take_newer(self, sent: str | None) -> bool:
        """Take the stored tokens if their access token is not the one `sent` and they come from the
        authorization server in use; whether it did."""
        tokens, expires_at, server = await self.context.storage.record()
        if tokens is None or not tokens.access_token or tokens.access_token == sent:
            return False
        in_use = self.context.oauth_metadata
        if in_use is not None and (server is None or not same_issuer(server, str(in_use.issuer))):
            return False  # issued by another authorization server (or unknown): never sent to this one
        if server is None:  # where they came from is unknown: never refreshed (see `_initialize`)
            tokens = tokens.model_copy(update={"refresh_token": None})
        self._take(tokens, expires_at, server)
        return True

    async def _step_up_waits(self, request: httpx2.Request, answer: httpx2.Response, scope: str) -> None:
        """A step-up the server asks for (`403 insufficient_scope`) where no person can authorize it (`serve`):
        the scope is kept for `manifold auth login` to ask for, and this call alone is refused saying what to
        run. The SDK's flow would end in `LoginNeeded` raised inside the transport, which closed the session
        and every call on it, and the next login, its token still valid, changed nothing."""
        granted = self.context.current_tokens.scope if self.context.current_tokens is not None else None
        lacking = _missing(scope, granted) or scope
        await self.context.storage.want_scope(lacking)
        command = login_command(self.guard.server)
        logger.warning(
            "server %r asks for more OAuth scope than its token has (%s): run `%s`",
            self.guard.server,
            printable(lacking, 200),
            command,
        )
        await _answered_instead(answer, request, f"this needs more OAuth scope than the gateway holds: run `{command}`")

    async def _login_waits(self, request: httpx2.Request, answer: httpx2.Response) -> None:
        """A 401 after the session started, where only a person can authorize anew (`serve`): its tokens
        were revoked, or can no longer be refreshed. This call alone is refused saying what to run; later
        ones too, without asking the authorization server again, until a login stores new tokens, which
        the next call then uses (no restart, no start backoff). The SDK's flow raised `LoginNeeded` inside
        the transport: the session closed ("the server closed the connection", for every call on it)."""
        tokens, _, _ = await self.context.storage.record()
        self._waiting_on = tokens.access_token if tokens is not None else ""
        logger.warning(  # `manifold servers` and the dashboard show it too (`needs_login`)
            "server %r refuses the gateway's OAuth tokens (revoked, or their refresh refused): its calls are "
            "refused until `%s`",
            self.guard.server,
            login_command(self.guard.server),
        )
        await _answered_instead(answer, request, login_words(self.guard.server))

    async def _still_waiting(self) -> bool:
        """Whether a login is still needed (`_login_waits`): no tokens stored since it was found needed."""
        if self._waiting_on is None:
            return False
        if await self._take_newer(self._waiting_on):
            self._waiting_on = None
            return False
        return True

    def _select_authorization_server(self, advertised: list[str]) -> str:
        if self.configured_issuer is None:
            return super()._select_authorization_server(advertised)  # type: ignore[misc, no-any-return]
        for server in advertised:
            if issuers_match(server, self.configured_issuer):
                return server
        hosts = ", ".join(sorted({urlsplit(server).netloc for server in advertised}))
        raise OAuthRequestFailed(
            self.guard.server,
            f"it names the authorization server {hosts}, not the configured issuer {self.configured_issuer}",
        )

    def _expected_issuer(self) -> str:
        # With an issuer configured, authorization-server metadata must name it, on every path.
        return self.configured_issuer or super()._expected_issuer()  # type: ignore[misc, no-any-return]

    def _refuse_elsewhere(self, sent: Sent) -> None:
        """A registration or token request goes only to the authorization server the client may use: the
        configured issuer's, and never the MCP server's origin (the SDK's fallback) when the issuer is known."""
        if sent.what not in ("token endpoint", "client registration"):
            return
        metadata = self.context.oauth_metadata
        expected = self._bound_issuer() if sent.what == "token endpoint" else self.configured_issuer
        if expected is None:
            return
        if metadata is None or not same_issuer(metadata, expected):
            raise self.guard.fail(sent, f"refused: not an endpoint of the authorization server {expected}")

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow (redirects included), each of its own requests checked and its answer capped."""
        flow = super().async_auth_flow(request)  # type: ignore[misc]
        try:
            outgoing = await flow.__anext__()
            while True:
                sent = None
                if outgoing is not request:
                    sent = await self.guard.check(outgoing)
                    self._refuse_elsewhere(sent)
                incoming = yield outgoing
                if sent is not None:
                    self.guard.cap(incoming, sent)
                    await self.guard.checked_document(incoming, sent)
                try:
                    outgoing = await flow.asend(incoming)
                except (OAuthRequestFailed, LoginNeeded, StopAsyncIteration):
                    raise
                except (OAuthTokenError, OAuthRegistrationError, ValueError) as exc:  # may carry the body
                    if sent is None:
                        raise
                    raise self.guard.failed_answer(incoming, sent, exc) from None
                except OAuthFlowError as exc:  # the SDK's own checks: its words name no body
                    raise (self.guard.fail(sent, str(exc)) if sent is not None else exc) from None
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        context = self.context
        if not self._initialized:
            # Loaded here, not in the SDK's flow: tokens read from the store with their access token expired
            # (a replica just started) are refreshed in turn too, or two replicas starting together spend one
            # refresh token twice (an authorization server that detects that revokes the whole grant).
            async with context.lock:
                if not self._initialized:
                    await self._initialize()
        if request.method == "POST" and await self._still_waiting():
            answer = yield request  # sent without a token: refused again, the authorization server unasked
            if answer.status_code == 401:
                await _answered_instead(answer, request, login_words(self.guard.server))
            return
        refreshing = context.current_tokens is not None and not context.is_token_valid()
        held = context.current_tokens.access_token if context.current_tokens is not None else ""
        async with context.storage.place.refresh_turn() if refreshing else nullcontext():
            if refreshing and request.method == "POST" and await self._still_waiting():  # a refresh failed for good
                answer = yield request
                if answer.status_code == 401:
                    await _answered_instead(answer, request, login_words(self.guard.server))
                return
            if refreshing:
                await self._take_newer(held)  # no refresh here if it did
            flow = super()._auth_flow(request)  # type: ignore[misc]
            retried = False
            try:
                outgoing = await flow.__anext__()
                while True:
                    incoming = yield outgoing
                    # A call's answer (a POST): the GET of a session's event stream retries on its own.
                    call = outgoing is request and request.method == "POST"
                    step_up = _step_up_scope(incoming) if call else None
                    if outgoing is request and (incoming.status_code == 401 or step_up) and not retried:
                        # Sent without a token when its refresh failed just now: the one it held is the stale one.
                        sent = request.headers.get("Authorization", "").removeprefix("Bearer ") or held
                        if await self._take_newer(sent):  # a login since (with the scope asked for), say
                            retried = True
                            await flow.aclose()
                            flow = super()._auth_flow(request)  # type: ignore[misc]  # sends the stored token
                            outgoing = await flow.__anext__()
                            continue
                    if step_up is not None and not self.person_at_hand:
                        await self._step_up_waits(request, incoming, step_up)
                        return
                    waits = self._answered and not self.person_at_hand  # a login, after the session started
                    if call and incoming.status_code == 401 and waits:
                        await self._login_waits(request, incoming)
                        return
                    if outgoing is request and incoming.status_code < 400:
                        self._answered = True
                    outgoing = await flow.asend(incoming)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()


class _ClientMetadata(OAuthClientMetadata):
    """The client's metadata, its scope always holding the scopes the gateway asks for itself (`ask_also`):
    the configured ones, and in a login those the stored tokens had or a step-up wanted. The SDK sets the
    scope to what the server names (its challenge, else its metadata's `scopes_supported`, else none)
    before registering and authorizing, which dropped the configured scopes: `auth.scopes` was never sent."""

    _also: str | None = PrivateAttr(default=None)

    def ask_also(self, scope: str | None) -> None:
        self._also = union_scopes(self._also, scope)
        super().__setattr__("scope", union_scopes(self.scope, self._also))

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope":
            value = union_scopes(value, self._also)
        super().__setattr__(name, value)


class _PersonProvider(_SharedRefresh, OAuthClientProvider):
    """The authorization-code grant (a person logs in once), refreshed in turn."""


_EXPIRY_MARGIN = 30.0  # seconds before a stored token's expiry that it counts as expired (at most a tenth of its life)

# RFC 6749 §3.3's scope-token: what a server's challenge may put into the token record and a login's request.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")
_MOST_SCOPES = 50


def _step_up_scope(response: httpx2.Response) -> str | None:
    """The scope a `403 insufficient_scope` answer asks for (the spec's step-up), its words checked; else None."""
    if response.status_code != 403 or extract_field_from_www_auth(response, "error") != "insufficient_scope":
        return None
    words = (extract_field_from_www_auth(response, "scope") or "").split()
    return " ".join(word for word in words[:_MOST_SCOPES] if _SCOPE_TOKEN.fullmatch(word)) or None


def _missing(wanted: str | None, granted: str | None) -> str | None:
    """The scopes of `wanted` that `granted` lacks, or None."""
    have = set((granted or "").split())
    lacking = [scope for scope in (wanted or "").split() if scope not in have]
    return " ".join(lacking) or None


async def _answered_instead(response: httpx2.Response, request: httpx2.Request, message: str) -> None:
    """Make `response` (not read yet) a JSON-RPC error answering `request` with `message`: the SDK's
    transport hands that call its error and keeps the session, where an exception from the auth flow
    ends the session and every call on it."""
    try:
        request_id = json.loads(request.content).get("id")
    except (ValueError, AttributeError):
        request_id = None
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": message}}
    network, response.stream = response.stream, httpx2.ByteStream(json.dumps(error).encode())
    for header in ("content-encoding", "content-length", "transfer-encoding"):
        response.headers.pop(header, None)
    response.headers["content-type"] = "application/json"
    if isinstance(network, httpx2.AsyncByteStream):
        await network.aclose()  # the server's own body, unread: its connection goes back to the pool


# --- the SDK's providers, set up from the config ---------------------------------------------------------


def _configured_client(config: ServerConfig, redirect_uri: str) -> OAuthClientInformationFull | None:
    auth = config.auth
    if auth is None or auth.client_id is None:
        return None
    return OAuthClientInformationFull(
        client_id=auth.client_id,
        client_secret=auth.client_secret,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_basic" if auth.client_secret else "none",
        client_name=_CLIENT_NAME,
        issuer=auth.issuer,  # its secret goes to that authorization server only
    )


async def oauth_provider(
    config: ServerConfig,
    storage: StoredTokens,
    *,
    open_browser: Callable[[str], object] | None = None,
    timeout: float = 300.0,
) -> httpx2.Auth:
    """The SDK's OAuth client for `config` (which has `auth`), its tokens in `storage`. A flow that needs
    a person opens `open_browser`, or the browser of `logins_in_browser`; with neither (the gateway
    serving) it stops at once with `LoginNeeded`."""
    auth = config.auth
    assert auth is not None and config.url is not None
    browser = open_browser or _browser.get()
    person = None
    if browser is not None and auth.grant == "authorization_code":
        # The port the client was registered with, if it was: its redirect URI must stay the same.
        port = auth.redirect_port or _loopback_port(await storage.stored_client())
        person = BrowserLogin(config.name, port, browser, timeout)
    redirect_uri = person.redirect_uri if person is not None else f"http://127.0.0.1{_CALLBACK_PATH}"
    scope = " ".join(auth.scopes) or None
    storage.configured = _configured_client(config, redirect_uri)
    # A client registered by a process that cannot log in is not kept (see `StoredTokens`).
    storage.keep_registrations = person is not None or auth.grant != "authorization_code"
    guard = Guard(config.name, auth.allow_private_addresses or await is_local_url(config.url))
    provider: _SharedRefresh
    if auth.grant == "client_credentials":
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        class MachineProvider(_SharedRefresh, ClientCredentialsOAuthProvider):
            """The client-credentials grant, its tokens kept like the others'."""

        assert auth.client_id is not None and auth.client_secret is not None
        provider = MachineProvider(
            config.url,
            storage,
            auth.client_id,
            auth.client_secret,
            token_endpoint_auth_method="client_secret_basic",
            scope=scope,
            issuer=auth.issuer,
        )
    else:

        async def no_person(_url: str) -> None:
            raise LoginNeeded(config.name)

        async def no_callback() -> AuthorizationCodeResult:
            raise LoginNeeded(config.name)  # pragma: no cover - the redirect handler stops first

        metadata = _ClientMetadata(
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_basic" if auth.client_secret else "none",
            client_name=_CLIENT_NAME,
            scope=scope,
        )
        provider = _PersonProvider(
            config.url,
            metadata,
            storage,
            redirect_handler=person.show_page if person is not None else no_person,
            callback_handler=person.take_redirect if person is not None else no_callback,
            client_metadata_url=auth.client_metadata_url,
        )
    provider.guard = guard
    provider.configured_issuer = auth.issuer
    if not isinstance(provider.context.client_metadata, _ClientMetadata):  # the client-credentials provider's own
        provider.context.client_metadata = _ClientMetadata.model_validate(provider.context.client_metadata.model_dump())
    provider.context.client_metadata.ask_also(scope)
    provider.person_at_hand = person is not None or auth.grant != "authorization_code"
    server_url = config.url
    # Tokens are stored with the authorization server they came from: the discovered one, else (a server
    # that publishes no metadata) its own origin, which the SDK then uses.
    storage.issued_by = lambda: provider.context.oauth_metadata or origin_metadata(server_url)
    return provider  # type: ignore[return-value]


async def check_login(config: ServerConfig, storage: StoredTokens) -> None:
    """Raise `LoginNeeded` when `config`'s server needs a person before the gateway can connect and none is
    at hand: the authorization-code grant with no tokens stored (checked before connecting, so `serve`
    never waits), outside `logins_in_browser`."""
    auth = config.auth
    needs_person = auth is not None and auth.grant == "authorization_code" and _browser.get() is None
    if needs_person and not await storage.has_tokens():
        raise LoginNeeded(config.name)


def login_needed_in(exc: BaseException) -> BackendStartError | None:
    """The `LoginNeeded` or `OAuthRequestFailed` somewhere in `exc` (a transport wraps what its auth raised
    in groups and causes): it says what happened without what a remote party answered."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, LoginNeeded | OAuthRequestFailed):
            return current
        if (failed := unanswered(current)) is not None:
            return failed
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)
    return None


async def open_once(config: ServerConfig, auth: httpx2.Auth) -> None:
    """Open a session to `config`'s server with `auth` (which runs the OAuth flow on the first 401), then close it."""
    from contextlib import AsyncExitStack

    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    from mcp_manifold._sdk import create_http_client, negotiate, sse_http_clients

    assert config.url is not None
    headers = dict(config.headers)
    async with AsyncExitStack() as stack:
        connect = auth.guard.network_backend() if isinstance(auth, _SharedRefresh) else None
        if config.transport == "sse":
            clients = sse_http_clients(network_backend=connect)
            opened = sse_client(config.url, headers=headers or None, auth=auth, httpx_client_factory=clients)
            read, write = await stack.enter_async_context(opened)
        else:
            http = await stack.enter_async_context(create_http_client(headers, auth, network_backend=connect))
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=http))
        session = await stack.enter_async_context(ClientSession(read, write))
        await negotiate(session, config.protocol)


# --- the login: a browser and a loopback redirect --------------------------------------------------------


class BrowserLogin:
    """One person's login: the authorization page in the browser, the redirect taken on a loopback port.

    The port is chosen when the login is set up (the redirect URI goes into the client's registration),
    listened on from the moment the page opens (a redirect that comes early waits in the backlog), and
    closed once the redirect has come.
    """

    def __init__(
        self, server: str, port: int | None, open_browser: Callable[[str], object], timeout: float = 300.0
    ) -> None:
        self.server = server
        self.port = port or _free_port()
        self.redirect_uri = f"http://127.0.0.1:{self.port}{_CALLBACK_PATH}"
        self._open_browser = open_browser
        self._timeout = timeout
        self._listener: Any = None
        self._state = ""

    async def show_page(self, url: str) -> None:
        # The state the SDK put in the page's address: only a redirect that carries it back is the answer.
        self._state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        try:
            self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        except OSError as exc:  # another program listens there: the redirect would go to it
            raise OAuthRequestFailed(
                self.server,
                f"the login's redirect port 127.0.0.1:{self.port} cannot be listened on ({exc.strerror or exc}; "
                "is another program using it?)",
            ) from None
        logger.info("opening the authorization page of server %r in the browser", self.server)
        _pages_waiting.add(self.server)
        # In a thread of its own, not awaited: a browser command may wait until its page is done, and the
        # page ends on the redirect, which `take_redirect` serves.
        threading.Thread(target=self._open, args=(url,), daemon=True, name="manifold-oauth-browser").start()

    def _open(self, url: str) -> None:
        try:
            opened = self._open_browser(url)
        except Exception:  # no usable browser: the person can still open the address
            opened = False
        if not opened:
            print(f"Open this address in a browser to log in to {self.server!r}:\n{url}", file=sys.stderr)

    async def take_redirect(self) -> AuthorizationCodeResult:
        listener, self._listener = self._listener, None
        if listener is None:  # pragma: no cover - the SDK always shows the page first
            raise RuntimeError("the authorization page was never opened")
        arrived, answers = anyio.create_memory_object_stream[AuthorizationCodeResult | Exception](1)
        async with listener, anyio.create_task_group() as group:
            group.start_soon(_serve_redirect, listener, arrived, self.server, self._state)
            try:
                with anyio.fail_after(self._timeout):
                    answer = await answers.receive()
            finally:
                group.cancel_scope.cancel()
        if isinstance(answer, Exception):
            raise answer
        _pages_waiting.discard(self.server)
        return answer


def _loopback_port(client: OAuthClientInformationFull | None) -> int | None:
    for uri in (client.redirect_uris or []) if client is not None else []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The servers whose authorization page a person was shown and whose login has not come back (a command
# run by a person: `serve` never shows one). When such a server's start then times out, its error says
# the login is what it waited for, not that the server is slow (it told a newcomer to raise init_timeout).
_pages_waiting: set[str] = set()


def login_page_waiting(server: str) -> bool:
    """Whether `server`'s authorization page was shown to a person and its login has not come back."""
    return server in _pages_waiting


# The browser of a command run by a person (`call`, `tools`, `servers`): while set, a server that needs a
# login starts it there instead of failing. `serve` never sets it.
_browser: ContextVar[Callable[[str], object] | None] = ContextVar("manifold_oauth_browser", default=None)


@contextmanager
def logins_in_browser(open_browser: Callable[[str], object] = webbrowser.open) -> Iterator[None]:
    """Within this block (and the tasks started in it), servers that need a person log in in the browser."""
    token = _browser.set(open_browser)
    try:
        yield
    finally:
        _browser.reset(token)


async def login(
    config: ServerConfig,
    storage: StoredTokens,
    connect: Callable[[httpx2.Auth], Awaitable[None]] | None = None,
    *,
    open_browser: Callable[[str], object] = webbrowser.open,
    timeout: float = 300.0,
) -> None:
    """Authorize the gateway to `config`'s server as a person: for the authorization-code grant, open the
    authorization page in the browser and take the redirect on a loopback port; for client credentials,
    no person is needed. `connect(auth)` opens a session to the server with that auth (the SDK runs the
    flow on the server's first 401); the tokens it gets are stored for the gateway to use."""
    auth = config.auth
    if auth is None:
        raise ValueError(f"server {config.name!r} has no 'auth' in its config: there is nothing to log in to")
    if connect is None:
        connect = lambda provider: open_once(config, provider)  # noqa: E731
    # One deadline for the whole login: each OAuth request has a timeout of its own, but a server that
    # answers slowly, request after request, must not keep `manifold auth login` waiting for ever.
    with anyio.fail_after(timeout + _LOGIN_MARGIN):
        if auth.grant == "client_credentials":
            await connect(await oauth_provider(config, storage))
            return
        # Stored tokens that lack a scope asked for (configured, or a step-up `serve` saw) would be used as
        # they are, and the login change nothing: the person authorizes anew, for their scope and that one.
        tokens, _, _ = await storage.record()
        wanted = await storage.wanted_scope()
        if tokens is not None and _missing(union_scopes(" ".join(auth.scopes) or None, wanted), tokens.scope):
            storage.passed_over = True
            wanted = union_scopes(tokens.scope, wanted)
        provider = await oauth_provider(config, storage, open_browser=open_browser, timeout=timeout)
        provider.context.client_metadata.ask_also(wanted)  # type: ignore[attr-defined]
        await connect(provider)


_LOGIN_MARGIN = 60.0  # seconds a login may take beyond the time the person has to answer in the browser


async def login_by_name(config: Config, name: str, *, open_browser: Callable[[str], object] = webbrowser.open) -> str:
    """`manifold auth login NAME`: log the gateway in to the configured server `name`; returns where its
    tokens are kept (the shared state store when `state_url` is set: every replica uses them). A name that
    is not configured, or a server without `auth`, is a clear error."""
    server = config.servers.get(name)
    if server is None:
        known = ", ".join(sorted(n for n, s in config.servers.items() if s.auth is not None)) or "none"
        raise NotFound(f"no server {name!r} in the config (servers with OAuth: {known})")
    if server.url is None:
        # Suggesting `auth` here led to a config problem: OAuth is for remote servers only.
        raise InvalidRequest(
            f"server {name!r} is started by the gateway (stdio) and needs no login: "
            "OAuth is for servers reached by 'url'"
        )
    if server.auth is None:
        raise InvalidRequest(f"server {name!r} has no 'auth' in its config: add {{'type': 'oauth'}} to log in to it")
    settings = config.settings
    try:
        async with token_storage(server, settings.data_dir, settings.state_url) as storage:
            await login(server, storage, open_browser=open_browser)
    except TimeoutError:
        # The browser's wait, or the login's own deadline (servers that kept it slow, request after request).
        raise ManifoldError(
            f"the login to {name!r} was not completed in time: no answer from the browser, or the servers were too slow"
        ) from None
    except ManifoldError:
        raise
    except Exception as exc:  # the OAuth flow's own errors (refused, mismatched state, unreachable server)
        found = login_needed_in(exc)
        if isinstance(found, OAuthRequestFailed):  # says which document, where, and what: never an answer's body
            raise ManifoldError(f"the login to {name!r} failed: {found}") from None
        unreachable = f" (could not reach {server.endpoint()}: is the server running?)" if _unreachable(exc) else ""
        raise ManifoldError(server.scrub(f"the login to {name!r} failed: {_first_words(exc)}{unreachable}")) from None
    return storage.place.where()


def _unreachable(exc: BaseException) -> bool:
    """Whether the flow failed because no connection could be made (the server down, a wrong port)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout)


def _first_words(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    # An SDK error may quote what a remote party sent (an `iss`): never its control characters, to a terminal.
    return printable(f"{type(exc).__name__}: {exc}".strip().rstrip(":"), 1000)


async def _serve_redirect(
    listener: Any,
    arrived: anyio.abc.ObjectSendStream[AuthorizationCodeResult | Exception],
    server: str,
    state: str,
) -> None:
    """Answer requests on the loopback port until the one that carries the authorization response: the
    one with the login's `state` (anything else may come from any page in the person's browser, and is
    answered 400 while the login goes on)."""

    async def handle(stream: Any) -> None:
        async with stream:
            try:
                with anyio.fail_after(10):
                    head = await _read_head(stream)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            target = head.split(" ", 2)[1] if head.count(" ") >= 2 else "/"
            parts = urlsplit(target)
            if parts.path != _CALLBACK_PATH:
                await _answer(stream, 404, "Not found.")
                return
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            if not state or not secrets.compare_digest(query.get("state", "").encode(), state.encode()):
                await _answer(stream, 400, "This is not the answer to the login under way.")
                return
            if "error" in query:
                words = printable(query.get("error_description") or query["error"])
                await _answer(stream, 400, f"The authorization server refused: {words}. You can close this window.")
                await arrived.send(RuntimeError(f"the authorization server refused the login: {words}"))
                return
            if "code" not in query:
                await _answer(stream, 400, "No authorization code in this address.")
                return
            await _answer(stream, 200, f"mcp-manifold is authorized to {server!r}. You can close this window.")
            await arrived.send(
                AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
            )

    await listener.serve(handle)


async def _read_head(stream: Any) -> str:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 16384:
        data += await stream.receive()
    return data.split(b"\r\n", 1)[0].decode("latin-1")


async def _answer(stream: Any, status: int, text: str) -> None:
    body = f"<!doctype html><meta charset=utf-8><title>mcp-manifold</title><p>{html.escape(text)}</p>".encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    await stream.send(head.encode() + body)
