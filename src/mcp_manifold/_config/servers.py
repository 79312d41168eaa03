"""The `mcpServers` map: each entry read and checked field by field, then the entries together.

Entries come in the spellings of the clients the map is shared with: `type` for `transport`,
`streamable-http` for `http`, an unquoted YAML number where text is meant. An entry with any
problem is left out with all its problems reported under the server's name, so one pass shows
everything to fix; across entries, two enabled servers may not expose the same prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args
from urllib.parse import urlsplit

from mcp_manifold._config.model import (
    BackendProtocol,
    OAuthGrant,
    RemoteOAuth,
    ServerConfig,
    SessionScope,
    ToolFilter,
    Transport,
)
from mcp_manifold._config.problems import Invalid, Problems, kind, unknown
from mcp_manifold._config.values import (
    as_bool,
    as_float,
    as_int,
    as_str,
    checked,
    expand_user,
    for_a_process,
    http_url_problem,
    non_negative,
    not_blank,
    nul_problem,
    positive,
    prefix_problem,
)
from mcp_manifold._config.variables import expand_fields
from mcp_manifold._core.naming import sanitize_prefix

# Every key a server entry may have; `type` is the Claude Code / VS Code spelling of `transport`.
SERVER_FIELDS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "transport",
    "type",
    "enabled",
    "disabled",
    "prefix",
    "tools",
    "lazy",
    "timeout",
    "max_concurrency",
    "cache_ttl",
    "session_scope",
    "protocol",
    "auth",
)
_AUTH_FIELDS = (
    "type",
    "grant",
    "client_id",
    "client_secret",
    "scopes",
    "issuer",
    "client_metadata_url",
    "redirect_port",
    "allow_private_addresses",
)


def _normalise_transport(value: Any) -> Transport:
    """Map the spellings clients use (streamable-http, streamableHttp, ...) onto the three transports."""
    word = as_str(value).strip().lower().replace("-", "").replace("_", "")
    known: dict[str, Transport] = {"stdio": "stdio", "http": "http", "streamablehttp": "http", "sse": "sse"}
    if word not in known:
        raise Invalid(f"unknown transport {value!r}: expected stdio, http, streamable-http or sse")
    return known[word]


def url_transport(url: Any) -> Transport:
    """The transport a `url` without `transport` means: SSE when a path segment is `sse`, else streamable HTTP.

    The rule FastMCP applies to `mcpServers` files (`http://localhost:8000/sse`, `.../sse/`), so configs
    written for smart-mcp-proxy and other FastMCP-based tools open the same way here.
    """
    try:
        path = urlsplit(url).path if isinstance(url, str) else ""
    except ValueError:  # an unparseable URL: the `url` field's own check says so, naming the field
        path = ""
    return "sse" if "sse" in path.split("/") else "http"


class _ServerReader:
    """Checks one server entry field by field, reporting every problem under the server's name."""

    def __init__(self, name: str, values: dict[str, Any], broken: set[str], problems: Problems) -> None:
        self.name = name
        self.values = values
        self.broken = broken  # fields whose ${VAR}s failed: present, but already reported
        self.problems = problems

    def report(self, field_name: str, message: str) -> None:
        self.problems.add(self.name, field_name, message)

    def get(self, key: str, convert: Callable[[Any], Any], default: Any = None) -> Any:
        if key not in self.values:
            return default
        try:
            return convert(self.values[key])
        except Invalid as exc:
            self.report(exc.path or key, str(exc))
            return default

    def present(self, key: str) -> bool:
        return key in self.values or key in self.broken

    def transport(self) -> Transport | None:
        declared = [(key, self.get(key, _normalise_transport)) for key in ("transport", "type")]
        named = {value for _, value in declared if value is not None}
        if len(named) > 1:
            self.report("type", "'transport' and 'type' disagree; give only one of them")
        has_command, has_url = self.present("command"), self.present("url")
        if has_command and has_url:
            self.report("url", "has both 'command' and 'url': a server is a local command or a remote url")
            return None
        if not has_command and not has_url:
            self.report("command", "needs 'command' (a local stdio server) or 'url' (a remote server)")
            return None
        wanted = next(iter(named)) if len(named) == 1 else None
        if wanted == "stdio" and not has_command:
            self.report("transport", "transport 'stdio' needs a 'command', not a 'url'")
        if wanted in ("http", "sse") and not has_url:
            self.report("transport", f"transport {wanted!r} needs a 'url', not a 'command'")
        if has_command:
            return "stdio"
        if wanted is None:
            return url_transport(self.values.get("url"))
        return "sse" if wanted == "sse" else "http"


# Converters of server fields that are a shared coercion plus a shared check.
_non_empty = checked(as_str, not_blank)
_process_text = checked(as_str, lambda value: not_blank(value) or nul_problem(value))  # a command, a cwd
_http_url = checked(lambda value: as_str(value).strip(), http_url_problem)
_prefix = checked(as_str, prefix_problem)


def _text_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise Invalid(f"must be a list of strings, not {kind(value)}")
    items = []
    for index, item in enumerate(value):
        try:
            items.append(for_a_process(item))
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}[{index}]") from None
    return tuple(items)


# What HTTP lets a header be (RFC 9110): a name of token characters; a value of visible ASCII, with spaces
# or tabs only between them. Anything else fails every request to the server, and the HTTP library's
# error would quote the value, which is often a secret.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?\Z")


def _header_map(value: Any, key: str) -> dict[str, str]:
    headers = _text_map(value, key)
    for name, text in headers.items():
        if not _HEADER_NAME.match(name):
            raise Invalid(f"{name!r} is no HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)", key)
        if not _HEADER_VALUE.match(text):  # the value is not shown: it may be a secret
            raise Invalid(
                "must be printable ASCII, with no line break or other control character and no space at "
                "either end (does an environment variable in it end with a newline?)",
                f"{key}.{name}",
            )
    return headers


def _text_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping of names to strings, not {kind(value)}")
    result = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise Invalid(f"names must be non-empty strings without '=' or a NUL character, not {name!r}")
        try:
            result[name] = for_a_process(item)
        except Invalid as exc:
            raise Invalid(str(exc), f"{key}.{name}") from None
    return result


def _oauth(value: Any) -> RemoteOAuth:
    """`auth: {type: oauth, grant?, client_id?, client_secret?, scopes?, issuer?, client_metadata_url?,
    redirect_port?, allow_private_addresses?}`: OAuth to a remote server, checked field by field."""
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping such as {{'type': 'oauth'}}, not {kind(value)}")
    for key in value:
        if key not in _AUTH_FIELDS:
            raise Invalid(unknown("field", str(key), _AUTH_FIELDS), f"auth.{key}")
    if value.get("type") != "oauth":
        raise Invalid(f"must be 'oauth' (the only kind of auth there is), not {value.get('type')!r}", "auth.type")
    grant = value.get("grant", "authorization_code")
    if grant not in get_args(OAuthGrant):
        raise Invalid(
            f"must be 'authorization_code' (a person logs in once) or 'client_credentials', not {grant!r}", "auth.grant"
        )
    fields: dict[str, Any] = {"grant": grant}
    for key in ("client_id", "client_secret"):
        if key in value:
            fields[key] = _auth_field(value[key], key, _non_empty)
    if grant == "client_credentials" and not (fields.get("client_id") and fields.get("client_secret")):
        raise Invalid("the client_credentials grant needs 'client_id' and 'client_secret'", "auth")
    if "client_secret" in fields and "client_id" not in fields:
        raise Invalid("a 'client_secret' needs its 'client_id'", "auth.client_id")
    if "scopes" in value:
        scopes = value["scopes"]
        scopes = scopes.split() if isinstance(scopes, str) else scopes
        if not isinstance(scopes, list) or not all(isinstance(scope, str) and scope for scope in scopes):
            raise Invalid(
                f"must be a list of scope names (or one space-separated string), not {kind(scopes)}", "auth.scopes"
            )
        fields["scopes"] = tuple(scopes)
    if "issuer" in value:
        fields["issuer"] = _auth_field(value["issuer"], "issuer", _http_url)
    if "client_metadata_url" in value:
        url = _auth_field(value["client_metadata_url"], "client_metadata_url", _non_empty)
        parts = urlsplit(url)
        if parts.scheme != "https" or parts.path in ("", "/"):
            raise Invalid(
                f"must be an https URL with a path (a client ID metadata document), not {url!r}",
                "auth.client_metadata_url",
            )
        fields["client_metadata_url"] = url
    if "redirect_port" in value:
        port = _auth_field(value["redirect_port"], "redirect_port", as_int)
        if not 1 <= port <= 65535:
            raise Invalid(f"must be a port number from 1 to 65535, not {port}", "auth.redirect_port")
        fields["redirect_port"] = port
    if "allow_private_addresses" in value:
        fields["allow_private_addresses"] = _auth_field(
            value["allow_private_addresses"], "allow_private_addresses", as_bool
        )
    return RemoteOAuth(**fields)


def _auth_field(value: Any, key: str, convert: Callable[[Any], Any]) -> Any:
    try:
        return convert(value)
    except Invalid as exc:
        raise Invalid(str(exc), f"auth.{key}") from None


def _tool_filter(value: Any) -> ToolFilter:
    if not isinstance(value, Mapping):
        raise Invalid(f"must be a mapping with 'include' and/or 'exclude' lists, not {kind(value)}")
    for key in value:
        if key not in ("include", "exclude"):
            raise Invalid(f"unknown key {key!r}: expected 'include' and/or 'exclude'", f"tools.{key}")
    globs = {}
    for key in ("include", "exclude"):
        raw = value.get(key) or []
        raw = [raw] if isinstance(raw, str) else raw  # a single glob is a list of one
        if not isinstance(raw, list) or not all(isinstance(glob, str) for glob in raw):
            raise Invalid(f"must be a list of glob strings, not {kind(raw)}", f"tools.{key}")
        globs[key] = tuple(raw)
    return ToolFilter(**globs)


def _session_scope(value: Any) -> SessionScope:
    if value not in get_args(SessionScope):
        raise Invalid(f"must be 'shared' (one session for every client) or 'client' (one per client), not {value!r}")
    return value  # type: ignore[no-any-return]


def _protocol(value: Any) -> BackendProtocol:
    if value not in get_args(BackendProtocol):
        raise Invalid(
            "must be 'auto' (2026-07-28 when the server offers it, else the handshake), 'legacy' (the initialize "
            f"handshake only) or 'modern' (2026-07-28 only), not {value!r}"
        )
    return value  # type: ignore[no-any-return]


def _parse_server(
    name: str, entry: Any, env: Mapping[str, str], problems: Problems, base: Path | None = None
) -> ServerConfig | None:
    """Check one `mcpServers` entry; None when it has any problem (all of them reported).

    A relative `command` path (`.venv/bin/python`, not a bare `python`, which PATH finds) and a relative
    `cwd` are taken from `base`, the config file's folder: a client starts the gateway anywhere."""
    if not isinstance(entry, Mapping):
        problems.add(name, None, f"must be a mapping of fields, not {kind(entry)}")
        return None
    before = len(problems.items)
    expanded: dict[str, str] = {}  # what came from the environment: redaction shows it as ${VAR}
    values, broken = expand_fields(entry, env, problems, name, expanded)
    for key in values:
        if key not in SERVER_FIELDS:
            problems.add(name, str(key), unknown("field", str(key), SERVER_FIELDS))
    read = _ServerReader(name, values, broken, problems)
    transport = read.transport()
    config = {
        "command": read.get("command", lambda value: _from_folder(expand_user(_process_text(value), env), base)),
        "args": read.get("args", lambda value: _text_list(value, "args"), ()),
        "env": read.get("env", lambda value: _text_map(value, "env"), {}),
        "cwd": read.get("cwd", lambda value: _from_folder(expand_user(_process_text(value), env), base, bare=True)),
        "url": read.get("url", _http_url),
        "headers": read.get("headers", lambda value: _header_map(value, "headers"), {}),
        "enabled": _enabled(read),
        "prefix": read.get("prefix", _prefix),
        "tools": read.get("tools", _tool_filter, ToolFilter()),
        "lazy": read.get("lazy", as_bool),
        "timeout": read.get("timeout", checked(as_float, positive)),
        "max_concurrency": read.get("max_concurrency", checked(as_int, positive)),
        "cache_ttl": read.get("cache_ttl", checked(as_float, non_negative)),
        "session_scope": read.get("session_scope", _session_scope, "shared"),
        "protocol": read.get("protocol", _protocol, "auto"),
        "auth": read.get("auth", _oauth),
    }
    if config["auth"] is not None and transport == "stdio":
        problems.add(name, "auth", "OAuth is for servers reached by 'url' (http or sse); a stdio server gets 'env'")
    if transport is None or len(problems.items) > before:
        return None
    return ServerConfig(name=name, transport=transport, expanded=expanded, **config)


def _from_folder(path: str, base: Path | None, *, bare: bool = False) -> str:
    """`path` taken from the config's folder when it is relative and names a path (has a slash, or `bare`).

    `npx -y @scope/server` has a slash, but in an argument: a command written with its arguments is left
    as written, so that the warning about it names what was written (`command_warning`)."""
    if base is None or Path(path).is_absolute() or not (bare or "/" in path or "\\" in path):
        return path
    first = path.split(maxsplit=1)[0] if path.strip() else path
    if not bare and first != path and not ("/" in first or "\\" in first) and not (base / path).exists():
        return path
    return str(base / path)


def _enabled(read: _ServerReader) -> bool:
    """`enabled`, or Cursor's and Cline's `disabled` (its opposite); both given must agree."""
    enabled = read.get("enabled", as_bool)
    disabled = read.get("disabled", as_bool)
    if enabled is not None and disabled is not None and enabled == disabled:
        read.report("disabled", f"says the opposite of 'enabled: {str(enabled).lower()}'; keep one of them")
    if enabled is not None:
        return bool(enabled)
    return not disabled if disabled is not None else True


def parse_servers(
    entries: Mapping[Any, Any], env: Mapping[str, str], problems: Problems, base: Path | None = None
) -> dict[str, ServerConfig]:
    """The servers of the `mcpServers` map that have no problem, in file order; every problem is reported."""
    servers = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip():
            problems.add(None, "mcpServers", f"server names must be non-empty strings, not {name!r}")
            continue
        server = _parse_server(name, entry, env, problems, base)
        if server is not None:
            servers[name] = server
    _check_prefixes(servers, problems)
    return servers


def _check_prefixes(servers: Mapping[str, ServerConfig], problems: Problems) -> None:
    """Two enabled servers may not share a prefix: their resource URIs could not be told apart, and a
    tool name both have would be listed once. Prefixes compare as exposed (`a.b` and `a_b` are equal)."""
    owners: dict[str, ServerConfig] = {}
    for server in servers.values():
        if not server.enabled:
            continue
        exposed = sanitize_prefix(server.exposed_prefix) if server.exposed_prefix else ""
        first = owners.setdefault(exposed, server)
        if first is server:
            continue
        source = f"prefix {exposed!r}" if server.prefix is not None else f"its name gives the prefix {exposed!r}, which"
        problems.add(
            server.name,
            "prefix",
            f"{source} is already used by server {first.name!r}; give one of them a different 'prefix'",
        )
