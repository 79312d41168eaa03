"""The configuration as data: what the rest of the gateway reads.

These classes hold values and answer questions about them; reading and checking raw data is the
other modules' job, and by the time `load_config` returns every value here is valid (the hub also
builds `ServerConfig`s for the instances it discovers). `identity()` and `fingerprint()` say
whether a changed entry reaches a different server, which must then be restarted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from mcp_manifold._config import redaction
from mcp_manifold._config.settings import Settings
from mcp_manifold._core.profiles import Profile

Transport = Literal["stdio", "http", "sse"]
SessionScope = Literal["shared", "client"]
BackendProtocol = Literal["auto", "legacy", "modern"]
OAuthGrant = Literal["authorization_code", "client_credentials"]


@dataclass(frozen=True)
class RemoteOAuth:
    """How the gateway authorizes itself to a remote server with OAuth 2.1 (the SDK's client auth does
    the protocol: discovery, PKCE, registration, scopes, refresh). `authorization_code` needs a person
    once (`manifold auth login NAME`); `client_credentials` is machine to machine."""

    grant: OAuthGrant = "authorization_code"
    client_id: str | None = None  # a pre-registered client; none: dynamic registration (or the metadata URL)
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()  # none: what the server's challenge or metadata asks for
    issuer: str | None = None  # the authorization server the client credentials belong to
    client_metadata_url: str | None = None  # a client ID metadata document (an https URL), instead of registering
    redirect_port: int | None = None  # the loopback port of the login's redirect (none: any free one)
    # OAuth endpoints on loopback, link-local or private addresses, for a server that is not on one itself.
    allow_private_addresses: bool = False

    def identity(self) -> dict[str, Any]:
        """What defines the authorization, less the secret (shown in status, hashed into the fingerprint)."""
        return {
            "grant": self.grant,
            "client_id": self.client_id,
            "scopes": list(self.scopes),
            "issuer": self.issuer,
            "client_metadata_url": self.client_metadata_url,
        } | ({"allow_private_addresses": True} if self.allow_private_addresses else {})


@dataclass(frozen=True)
class ToolFilter:
    """Which of a server's tools are exposed, by fnmatch globs on the server's own tool names."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))

    def allows(self, tool_name: str) -> bool:
        """True if the name matches an include glob (or there are none) and no exclude glob."""
        if self.include and not any(fnmatchcase(tool_name, glob) for glob in self.include):
            return False
        return not any(fnmatchcase(tool_name, glob) for glob in self.exclude)


@dataclass(frozen=True)
class ServerConfig:
    """One downstream MCP server as configured."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    enabled: bool = True
    prefix: str | None = None
    tools: ToolFilter = ToolFilter()
    lazy: bool | None = None
    timeout: float | None = None
    max_concurrency: int | None = None
    cache_ttl: float | None = None
    # shared: one session for every client; client: each client (HTTP session, or 2026-era principal) its own,
    # told that client's capabilities and roots (for servers whose behaviour depends on the client).
    session_scope: SessionScope = "shared"
    # auto: MCP 2026-07-28 if the server answers server/discover, else the initialize handshake;
    # legacy: the handshake only; modern: 2026-07-28 only.
    protocol: BackendProtocol = "auto"
    auth: RemoteOAuth | None = None  # OAuth to a remote server (url transports only)
    # The environment variables this entry's `${VAR}`s took their values from, by name: wherever the
    # server is shown, such a value reads `${VAR}`. Not part of what the server is (identity()).
    expanded: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    @property
    def exposed_prefix(self) -> str:
        """The prefix of this server's tool names: `prefix` if set, else the server key."""
        return self.prefix if self.prefix is not None else self.name

    def identity(self) -> dict[str, Any]:
        """What defines the connection; two configs with equal identities reach the same server."""
        return {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
        } | ({"auth": self.auth.identity()} if self.auth is not None else {})

    def fingerprint(self) -> str:
        """A short stable hash of `identity()`, to tell whether a server must be restarted."""
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    # What is shown of the server anywhere (listings, status, logs, audit, the dashboard, the CLI) goes
    # through these three, which follow `redaction`: the one place that decides what is secret.

    def scrub(self, text: str) -> str:
        """`text` (an error message, a stderr line) with values from the environment shown as `${VAR}`
        and this server's other secret values replaced by ***."""
        return redaction.scrub(self, text)

    def redacted(self) -> dict[str, Any]:
        """`identity()` safe to show or log: values from the environment read `${VAR}`; env and header
        values, URL credentials and secret-looking query parameters and command-line options `***`."""
        return redaction.redacted(self)

    def endpoint(self) -> str:
        """The url, or the command line, as listings show it (redacted)."""
        return redaction.endpoint(self)

    def __repr__(self) -> str:
        # A repr lands in logs and tracebacks: it shows the redacted config, never a secret.
        return f"ServerConfig(name={self.name!r}, {self.redacted()!r})"


@dataclass(frozen=True)
class ApiKey:
    """A static API key, kept only as its SHA-256 (hex), and the principal it names."""

    principal: str
    sha256: str = field(repr=False)


@dataclass(frozen=True)
class OAuthConfig:
    """OAuth 2.1 resource-server mode: JWT access tokens of one issuer, checked against its keys."""

    issuer: str
    audience: tuple[str, ...]  # what `aud` must contain (RFC 8707's resource): this gateway's URL
    resource_url: str | None = None  # this gateway's public /mcp URL, for RFC 9728 metadata
    jwks_url: str | None = None
    jwks_file: str | None = None
    principal_claim: str = "sub"
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    required_scopes: tuple[str, ...] = ()
    leeway: float = 30.0  # seconds of clock skew allowed on exp / nbf / iat
    operator_scope: str = "manifold:operator"  # a token with this scope is an operator's


@dataclass(frozen=True)
class AuthConfig:
    """How HTTP clients authenticate (the `auth` section); nothing configured means no authentication."""

    api_keys: tuple[ApiKey, ...] = ()
    oauth: OAuthConfig | None = None
    # Who may use the operator routes (/metrics, the dashboard's overview and calls): principal globs
    # and `claim:NAME=VALUE`, as a profile's `principals`; a token's principal is `oauth:<claim>`.
    operators: tuple[str, ...] = ()
    # Tokens refused before their `exp` (one leaked, a person gone): token principals (`oauth:<claim>`), each
    # of that principal's tokens, and token ids (`jti:<id>`), one token.
    revoked: frozenset[str] = frozenset()

    @property
    def enabled(self) -> bool:
        return bool(self.api_keys) or self.oauth is not None

    def has_key(self, sha256: str, principal: str | None) -> bool:
        """Whether the API key with this SHA-256 (hex) is configured, naming `principal`: after a reload,
        whether what a key started (a stream, a program) may go on as that principal."""
        return any(key.sha256 == sha256 and key.principal == principal for key in self.api_keys)

    def revokes(self, principal: str | None, claims: Mapping[str, Any] | None) -> bool:
        """Whether `auth.revoked` names the token of this principal and these claims (never an API key's)."""
        if not self.revoked or claims is None:
            return False
        token_id = claims.get("jti")
        return principal in self.revoked or (isinstance(token_id, str) and f"jti:{token_id}" in self.revoked)

    def still_accepts(self, principal: str | None, claims: Mapping[str, Any] | None, key_digest: str | None) -> bool:
        """Whether what a credential started (a stream, a session, a program) may go on after a reload: its
        API key still configured for its principal, or its token not revoked."""
        if key_digest is not None:
            return self.has_key(key_digest, principal)
        return not self.revokes(principal, claims)


@dataclass
class Config:
    """A checked configuration: the servers in file order (disabled ones included), the settings, how
    HTTP clients authenticate, and the profiles (what each client may see and use).

    `path` and `overrides` (the command line's settings) are where it came from: a reload reads the
    same file with the same flags.
    """

    servers: dict[str, ServerConfig]
    settings: Settings
    path: Path | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    auth: AuthConfig = field(default_factory=AuthConfig)
    profiles: dict[str, Profile] = field(default_factory=dict)

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}
