"""The gateway's configuration: which servers sit behind it and how the gateway itself behaves.

A config file is the `mcpServers` map Claude Desktop and Cursor use, as JSON or YAML, plus an
optional `manifold` section with the gateway's settings. Every problem found in a file, the
environment or the command line is collected and reported together in one `ConfigError`, so a
user can fix everything in one pass.

Settings resolve in this order: command-line flag > `MANIFOLD_<NAME>` environment variable >
file > default. String values in the file may use `${VAR}` and `${VAR:-default}`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, NamedTuple, Union, get_args, get_origin, get_type_hints
from urllib.parse import unquote, urlsplit, urlunsplit

import yaml

from mcp_manifold._errors import ConfigError, ConfigProblem
from mcp_manifold.model_folders import BUNDLED, model_folder_problem
from mcp_manifold.naming import sanitize_prefix

Transport = Literal["stdio", "http", "sse"]

ENV_PREFIX = "MANIFOLD_"
ENVIRONMENT = "environment"  # the `file` of problems found in MANIFOLD_* variables
COMMAND_LINE = "command line"  # the `file` of problems found in CLI overrides
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
SURFACE_NAMES = ("direct", "proxy", "dispatch", "retrieve", "hub")
SEPARATORS = ("_", "-", "__", "--", "_-", "-_")

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
    "prefix",
    "tools",
    "lazy",
    "timeout",
    "max_concurrency",
    "cache_ttl",
)
TOP_LEVEL_KEYS = ("mcpServers", "manifold")

# Names as clients and LLM APIs accept them; an explicit prefix is used verbatim, so it must be one.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# `$$`, or `${...}` (group 3 is missing when the brace is never closed).
_REFERENCE = re.compile(r"\$(?:(\$)|\{([^}]*)(\})?)")
# Query parameters, header-like flags and CLI options whose value is probably a credential.
_SECRET_NAME = re.compile(r"token|key|secret|passw|auth|credential|signature", re.IGNORECASE)
_HIDDEN = "***"
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class _Invalid(ValueError):
    """A value failed a check; `path` names a nested location (``env.X``) when there is one."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


# --- ${VAR} expansion -------------------------------------------------------------------------


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """Expand `${VAR}` and `${VAR:-default}` from `env`; `$$` is a literal `$`, a lone `$` stays as is.

    `${VAR:-default}` uses the default when VAR is unset or empty (as in the shell); the default is
    taken literally. Raises `ValueError` naming the variable when VAR is unset and has no default.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return "$"
        if match.group(3) is None:
            raise _Invalid(f"unterminated reference {match.group(0)!r}: missing '}}'")
        return _resolve_reference(match.group(2), env)

    return _REFERENCE.sub(replace, text)


def escape_vars(text: str) -> str:
    """The inverse of `expand_vars` for literal text: every `$` becomes `$$`."""
    return text.replace("$", "$$")


def _resolve_reference(body: str, env: Mapping[str, str]) -> str:
    name, has_default, default = body.partition(":-")
    if not _VAR_NAME.match(name):
        raise _Invalid(f"malformed reference '${{{body}}}': expected ${{NAME}} or ${{NAME:-default}}")
    value = env.get(name)
    if has_default:
        return value if value else default
    if value is None:
        raise _Invalid(f"environment variable {name!r} is not set (write ${{{name}:-default}} to give a default)")
    return value


def _expand_tree(value: Any, env: Mapping[str, str], path: str) -> Any:
    """Expand every string inside `value` (keys excluded); errors carry the nested path."""
    if isinstance(value, str):
        try:
            return expand_vars(value, env)
        except _Invalid as exc:
            raise _Invalid(str(exc), path) from None
    if isinstance(value, Mapping):
        return {key: _expand_tree(item, env, f"{path}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_tree(item, env, f"{path}[{index}]") for index, item in enumerate(value)]
    return value


# --- value checks shared by servers and settings -----------------------------------------------


def _kind(value: Any) -> str:
    """How a YAML/JSON value reads in a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):  # from the environment, a CLI flag or a ${VAR}
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
        raise _Invalid(f"must be true or false (or 1/0, yes/no, on/off), not {value!r}")
    raise _Invalid(f"must be true or false, not {_kind(value)}")


def _as_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    shown = repr(value) if isinstance(value, str | float) else _kind(value)
    raise _Invalid(f"must be a whole number, not {shown}")


def _as_float(value: Any) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        shown = repr(value) if isinstance(value, str) else _kind(value)
        raise _Invalid(f"must be a number, not {shown}")
    if not math.isfinite(number):
        raise _Invalid(f"must be a finite number, not {value!r}")
    return number


def _as_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Invalid(f"must be a string, not {_kind(value)}")


def _as_str_list(value: Any) -> list[str]:
    if isinstance(value, str):  # comma-separated, as environment variables and flags give lists
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    raise _Invalid(f"must be a list of strings, not {_kind(value)}")


def _as_text(value: Any) -> str:
    """A scalar that ends up as text (an argument, an env value): YAML may give `8080` unquoted."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    hint = " (quote it in YAML)" if isinstance(value, bool) else ""
    raise _Invalid(f"must be a string, not {_kind(value)}{hint}")


def _http_url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http:// or https:// URL with a host, not {url!r}"
    return None


def _did_you_mean(name: str, known: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _expand_user(path: str, env: Mapping[str, str]) -> str:
    """`~` and `~/...` become the home directory; HOME comes from `env` so tests stay hermetic."""
    if path != "~" and not path.startswith(("~/", "~\\")):
        return path
    home = env.get("HOME") or env.get("USERPROFILE") or str(Path.home())
    return home + path[1:]


# --- servers -----------------------------------------------------------------------------------


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
        }

    def fingerprint(self) -> str:
        """A short stable hash of `identity()`, to tell whether a server must be restarted."""
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def scrub(self, text: str) -> str:
        """`text` (an error message, a stderr line) with this server's secret values replaced by ***."""
        for secret in secret_values(self):
            text = text.replace(secret, _HIDDEN)
        if self.url:
            text = text.replace(self.url, redact_url(self.url))
        return text

    def redacted(self) -> dict[str, Any]:
        """`identity()` safe to show or log: env and header values, URL credentials and secret-looking
        query parameters and command-line options are replaced by `***`."""
        shown = self.identity()
        shown["env"] = dict.fromkeys(self.env, _HIDDEN)
        shown["headers"] = dict.fromkeys(self.headers, _HIDDEN)
        shown["args"] = redact_args(self.args)
        shown["url"] = redact_url(self.url) if self.url else self.url
        return shown


def redact_url(url: str) -> str:
    """Hide the userinfo password (or a bare user, often a token) and secret-named query values."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{_HIDDEN}@{host}" if has_password else f"{_HIDDEN}@{host}"
    query = "&".join(_redact_query_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _redact_query_pair(pair: str) -> str:
    name, has_value, _ = pair.partition("=")
    if has_value and _SECRET_NAME.search(unquote(name)):
        return f"{name}={_HIDDEN}"
    return pair


def redact_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """Hide the values of secret-looking options: `--api-key=X` and `--api-key X` both lose X."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            shown.append(_HIDDEN)
            hide_next = False
            continue
        hide_next = False
        name, has_value, _ = arg.partition("=")
        if arg.startswith("-") and _SECRET_NAME.search(name):
            shown.append(f"{name}={_HIDDEN}" if has_value else arg)
            hide_next = not has_value
        elif "://" in arg:
            # A URL argument (a database DSN such as postgresql://user:pw@host/db) can carry a secret.
            shown.append(_URL_IN_ARG.sub(lambda found: _redact_url_if_secret(found.group()), arg))
        elif has_value and _ENV_NAME.match(name) and _SECRET_NAME.search(name):
            shown.append(f"{name}={_HIDDEN}")  # `API_KEY=value`, as given to `env` or `docker run -e`
        else:
            shown.append(arg)
    return shown


_URL_IN_ARG = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _redact_url_if_secret(url: str) -> str:
    # Only a URL with something to hide is rebuilt: urlunsplit may respell an ordinary one.
    return redact_url(url) if _url_secrets(url) else url


class _Problems:
    """Collects problems from one source into a shared list."""

    def __init__(self, source: str, items: list[ConfigProblem]) -> None:
        self.source = source
        self.items = items

    def add(self, server: str | None, field_name: str | None, message: str) -> None:
        self.items.append(ConfigProblem(self.source, server, field_name, message))


def _normalise_transport(value: Any) -> Transport:
    """Map the spellings clients use (streamable-http, streamableHttp, ...) onto the three transports."""
    word = _as_str(value).strip().lower().replace("-", "").replace("_", "")
    known: dict[str, Transport] = {"stdio": "stdio", "http": "http", "streamablehttp": "http", "sse": "sse"}
    if word not in known:
        raise _Invalid(f"unknown transport {value!r}: expected stdio, http, streamable-http or sse")
    return known[word]


class _ServerReader:
    """Checks one server entry field by field, reporting every problem under the server's name."""

    def __init__(self, name: str, values: dict[str, Any], broken: set[str], problems: _Problems) -> None:
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
        except _Invalid as exc:
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
        return "sse" if wanted == "sse" else "http"


def _non_empty(value: Any) -> str:
    text = _as_str(value)
    if not text.strip():
        raise _Invalid("must not be empty")
    return text


def _url(value: Any) -> str:
    text = _as_str(value).strip()
    problem = _http_url_problem(text)
    if problem:
        raise _Invalid(problem)
    return text


def _text_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise _Invalid(f"must be a list of strings, not {_kind(value)}")
    items = []
    for index, item in enumerate(value):
        try:
            items.append(_as_text(item))
        except _Invalid as exc:
            raise _Invalid(str(exc), f"{key}[{index}]") from None
    return tuple(items)


def _text_map(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _Invalid(f"must be a mapping of names to strings, not {_kind(value)}")
    result = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise _Invalid(f"names must be non-empty strings, not {name!r}")
        try:
            result[name] = _as_text(item)
        except _Invalid as exc:
            raise _Invalid(str(exc), f"{key}.{name}") from None
    return result


def _prefix(value: Any) -> str:
    text = _as_str(value)
    if not _TOOL_NAME.match(text):
        raise _Invalid(f"must be 1-64 letters, digits, '_' or '-', not {text!r}")
    return text


def _tool_filter(value: Any) -> ToolFilter:
    if not isinstance(value, Mapping):
        raise _Invalid(f"must be a mapping with 'include' and/or 'exclude' lists, not {_kind(value)}")
    for key in value:
        if key not in ("include", "exclude"):
            raise _Invalid(f"unknown key {key!r}: expected 'include' and/or 'exclude'", f"tools.{key}")
    globs = {}
    for key in ("include", "exclude"):
        raw = value.get(key) or []
        raw = [raw] if isinstance(raw, str) else raw  # a single glob is a list of one
        if not isinstance(raw, list) or not all(isinstance(glob, str) for glob in raw):
            raise _Invalid(f"must be a list of glob strings, not {_kind(raw)}", f"tools.{key}")
        globs[key] = tuple(raw)
    return ToolFilter(**globs)


def _checked(convert: Callable[[Any], Any], check: Callable[[Any], str | None]) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        converted = convert(value)
        problem = check(converted)
        if problem:
            raise _Invalid(problem)
        return converted

    return run


def _positive(value: float) -> str | None:
    return None if value > 0 else f"must be greater than 0, not {value:g}"


def _non_negative(value: float) -> str | None:
    return None if value >= 0 else f"must be 0 or more, not {value:g}"


def _expand_entry(
    name: str, entry: Mapping[str, Any], env: Mapping[str, str], problems: _Problems
) -> tuple[dict[str, Any], set[str]]:
    """Expand ${VAR}s field by field; a field that fails is reported once and left out of the values."""
    values: dict[str, Any] = {}
    broken: set[str] = set()
    for key, raw in entry.items():
        if raw is None:  # null means "not set", as if the key were absent
            continue
        try:
            values[key] = _expand_tree(raw, env, str(key))
        except _Invalid as exc:
            problems.add(name, exc.path or str(key), str(exc))
            broken.add(key)
    return values, broken


def _parse_server(name: str, entry: Any, env: Mapping[str, str], problems: _Problems) -> ServerConfig | None:
    """Check one `mcpServers` entry; None when it has any problem (all of them reported)."""
    if not isinstance(entry, Mapping):
        problems.add(name, None, f"must be a mapping of fields, not {_kind(entry)}")
        return None
    before = len(problems.items)
    values, broken = _expand_entry(name, entry, env, problems)
    for key in values:
        if key not in SERVER_FIELDS:
            problems.add(name, str(key), f"unknown field{_did_you_mean(str(key), SERVER_FIELDS)}")
    read = _ServerReader(name, values, broken, problems)
    transport = read.transport()
    config = {
        "command": read.get("command", _non_empty),
        "args": read.get("args", lambda value: _text_list(value, "args"), ()),
        "env": read.get("env", lambda value: _text_map(value, "env"), {}),
        "cwd": read.get("cwd", lambda value: _expand_user(_non_empty(value), env)),
        "url": read.get("url", _url),
        "headers": read.get("headers", lambda value: _text_map(value, "headers"), {}),
        "enabled": read.get("enabled", _as_bool, True),
        "prefix": read.get("prefix", _prefix),
        "tools": read.get("tools", _tool_filter, ToolFilter()),
        "lazy": read.get("lazy", _as_bool),
        "timeout": read.get("timeout", _checked(_as_float, _positive)),
        "max_concurrency": read.get("max_concurrency", _checked(_as_int, _positive)),
        "cache_ttl": read.get("cache_ttl", _checked(_as_float, _non_negative)),
    }
    if transport is None or len(problems.items) > before:
        return None
    return ServerConfig(name=name, transport=transport, **config)


def _parse_servers(raw: Any, env: Mapping[str, str], problems: _Problems) -> dict[str, ServerConfig]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, "mcpServers", f"must be a mapping of server names to servers, not {_kind(raw)}")
        return {}
    servers = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not name.strip():
            problems.add(None, "mcpServers", f"server names must be non-empty strings, not {name!r}")
            continue
        server = _parse_server(name, entry, env, problems)
        if server is not None:
            servers[name] = server
    _check_prefixes(servers, problems)
    return servers


def _check_prefixes(servers: Mapping[str, ServerConfig], problems: _Problems) -> None:
    """Two enabled servers may not share a prefix: their resource URIs could not be told apart, and a
    tool name both have would be listed once. Prefixes compare as exposed (`a.b` and `a_b` are equal)."""
    owners: dict[str, ServerConfig] = {}
    for server in servers.values():
        if not server.enabled:
            continue
        exposed = sanitize_prefix(server.exposed_prefix)
        first = owners.setdefault(exposed, server)
        if first is server:
            continue
        source = f"prefix {exposed!r}" if server.prefix is not None else f"its name gives the prefix {exposed!r}, which"
        problems.add(
            server.name,
            "prefix",
            f"{source} is already used by server {first.name!r}; give one of them a different 'prefix'",
        )


# --- settings ----------------------------------------------------------------------------------


def _tool_name_problem(value: str) -> str | None:
    return None if _TOOL_NAME.match(value) else f"must be 1-64 letters, digits, '_' or '-', not {value!r}"


def _port_problem(value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number from 0 to 65535, not {value}"


def _not_blank(value: str) -> str | None:
    return None if value.strip() else "must not be empty"


def _search_models_problem(entries: list[str]) -> str | None:
    # Checked here rather than when the first search loads a model, which may be long after start.
    for entry in entries:
        if problem := model_folder_problem(entry):
            return problem
    return None


def _setting(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] = (),
    check: Callable[[Any], str | None] | None = None,
    path: bool = False,
) -> Any:
    """A Settings field; its metadata drives checks, the CLI flags and the docs."""
    metadata = {"help": help, "choices": choices, "check": check, "path": path}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    if callable(default):
        return field(default_factory=default, metadata=metadata)
    return field(default=default, metadata=metadata)


def default_data_dir(env: Mapping[str, str] | None = None) -> str:
    """`$XDG_DATA_HOME/mcp-manifold`, else `~/.local/share/mcp-manifold`."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or _expand_user("~/.local/share", env)
    return str(Path(base) / "mcp-manifold")


@dataclass
class Settings:
    """The gateway's own settings (the `manifold` section)."""

    expose: list[str] = _setting(  # noqa: RUF009 - _setting returns a dataclasses.field with a factory
        ["direct"],
        "Surfaces offered to clients, in order: direct, proxy, dispatch, retrieve, hub.",
        choices=SURFACE_NAMES,
    )
    separator: str = _setting(
        "_", "Joins a server's prefix and a tool name (git + _ + status = git_status).", choices=SEPARATORS
    )
    lazy: bool = _setting(True, "Start or connect a server only when it is first needed.")
    init_timeout: float = _setting(
        30.0, "Seconds a server gets to start and finish the MCP initialize handshake.", check=_positive
    )
    call_timeout: float = _setting(
        120.0, "Seconds a tool call may take unless the server sets its own timeout.", check=_positive
    )
    stderr_lines: int = _setting(
        200, "Lines of each stdio server's stderr kept for error messages.", check=_non_negative
    )
    data_dir: str = _setting(
        default_data_dir, "Where the gateway keeps its state (indexes, spilled results).", check=_not_blank, path=True
    )
    log_level: str = _setting(
        "warning",
        "Log level: debug, info, warning, error or critical.",
        choices=("debug", "info", "warning", "error", "critical"),
    )
    host: str = _setting("127.0.0.1", "Address the HTTP endpoint listens on.", check=_not_blank)
    port: int = _setting(8765, "Port the HTTP endpoint listens on (0 picks a free one).", check=_port_problem)
    http: bool = _setting(False, "Serve streamable HTTP on host:port instead of stdio.")
    proxy_tool_name: str = _setting("proxy", "Name of the proxy surface's tool.", check=_tool_name_problem)
    spill_threshold: int = _setting(
        0, "Tool results larger than this many bytes go to a file instead; 0 turns this off.", check=_non_negative
    )
    spill_dir: str | None = _setting(None, "Where spilled results are written (default: under data_dir).", path=True)
    spill_ttl: float = _setting(3600.0, "Seconds a spilled result is kept.", check=_positive)
    toon: bool = _setting(False, "Render JSON tool results as TOON, a compact notation that saves tokens.")
    search_embedder: str = _setting(
        "hybrid",
        "How tool search ranks tools: hybrid (BM25 + the bundled local model; BM25 alone where it cannot load),"
        " bm25 or openai.",
        choices=("bm25", "hybrid", "openai"),
    )
    search_models: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Models for search_embedder hybrid: minilm (the bundled one) or sentence-transformers model folders;"
        " with two or more their cosines are averaged.",
        check=_search_models_problem,
        path=True,
    )
    search_top_k: int = _setting(5, "How many tools a search returns.", check=_positive)
    tools_limit: int = _setting(15, "Most tools listed at once by dynamic routing.", check=_positive)
    routing: str = _setting(
        "call_tool",
        "How found tools are called: call_tool (through a gateway tool) or dynamic (added to the tool list).",
        choices=("call_tool", "dynamic"),
    )
    list_changed_exec: str | None = _setting(None, "Command run when the tool list changes.")
    list_changed_exec_timeout: float = _setting(5.0, "Seconds list_changed_exec may run.", check=_positive)
    discovery_dir: str | None = _setting(
        None,
        "Where running MCP servers register for the hub (default: $XDG_RUNTIME_DIR/manifold/instances).",
        path=True,
    )
    ping_interval: float = _setting(
        10.0, "Seconds between health pings to servers; 0 turns pings off.", check=_non_negative
    )
    ping_timeout: float = _setting(5.0, "Seconds a ping may take before the server counts as down.", check=_positive)
    session_idle_timeout: float = _setting(
        1800.0, "Seconds an idle HTTP client session is kept; 0 keeps it forever.", check=_non_negative
    )
    shutdown_timeout: float = _setting(
        10.0,
        "Seconds HTTP requests in flight get to finish when the gateway stops; open streams are then cut.",
        check=_positive,
    )
    breaker_threshold: int = _setting(3, "Failures in a row after which a server is paused.", check=_positive)
    breaker_cooldown: float = _setting(
        10.0, "Seconds a paused server waits before it is tried again.", check=_non_negative
    )
    spill_allowed_dirs: list[str] = _setting(  # noqa: RUF009 - a dataclasses.field with a factory
        [],
        "Directories besides the spill directory whose files argumentsFile and resultFile may name.",
        path=True,
    )
    openai_base_url: str | None = _setting(
        None, "Base URL of an OpenAI-compatible embeddings API (default: OpenAI's).", check=_http_url_problem
    )
    openai_model: str = _setting(
        "text-embedding-3-small", "Embedding model for search_embedder openai.", check=_not_blank
    )


class SettingField(NamedTuple):
    """One setting as the CLI and docs see it."""

    name: str
    type: Any  # bool, int, float, str, str | None or list[str]
    default: Any
    help: str


def settings_fields() -> list[SettingField]:
    """Every setting with its type, default and help, in declaration order."""
    hints = get_type_hints(Settings)
    defaults = Settings()
    return [
        SettingField(f.name, hints[f.name], getattr(defaults, f.name), f.metadata["help"]) for f in fields(Settings)
    ]


def env_var(setting: str) -> str:
    """The environment variable that sets `setting`: MANIFOLD_CALL_TIMEOUT for call_timeout."""
    return ENV_PREFIX + setting.upper()


def _converter(annotation: Any) -> Callable[[Any], Any]:
    """The coercion for a Settings field type; `X | None` coerces like X (None never reaches it)."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    if get_origin(annotation) is list:
        return _as_str_list
    return {bool: _as_bool, int: _as_int, float: _as_float, str: _as_str}[annotation]


_SETTING_FIELDS = {f.name: f for f in fields(Settings)}
_SETTING_TYPES = get_type_hints(Settings)


def _convert_setting(name: str, value: Any, env: Mapping[str, str], base: Path | None = None) -> Any:
    """Coerce, normalise and check one setting value; raises `_Invalid`.

    `base` is the folder of the config file the value comes from: relative paths written there mean
    that folder (a desktop client starts the gateway from any directory), not the working directory.
    """
    meta = _SETTING_FIELDS[name].metadata
    value = _converter(_SETTING_TYPES[name])(value)
    choices: tuple[str, ...] = meta["choices"]
    if choices and isinstance(value, list):
        value = list(dict.fromkeys(item.strip().lower() for item in value))  # drop repeats, keep order
        bad = [item for item in value if item not in choices]
        if bad or not value:
            shown = ", ".join(map(repr, bad)) if bad else "an empty list"
            raise _Invalid(f"got {shown}; pick one or more of {', '.join(choices)}")
    elif choices:
        value = value.strip().lower()
        if value not in choices:
            raise _Invalid(f"must be one of {', '.join(repr(c) for c in choices)}, not {value!r}")
    if meta["path"]:  # before the check, which may look at the path

        def place(item: str) -> str:
            item = _expand_user(item, env)
            if (
                base is None
                or not item
                or Path(item).is_absolute()
                or (name == "search_models" and item.strip().lower() == BUNDLED)
            ):
                return item
            return str(base / item)

        value = [place(item) for item in value] if isinstance(value, list) else place(value)
    if meta["check"]:
        problem = meta["check"](value)
        if problem:
            raise _Invalid(problem)
    return value


def _settings_layer(
    raw: Mapping[str, Any],
    problems: _Problems,
    label: Callable[[str], str],
    env: Mapping[str, str],
    base: Path | None = None,
) -> dict[str, Any]:
    """Check one source of settings; `label` turns a setting name into the problem's field."""
    values = {}
    for name, value in raw.items():
        if name not in _SETTING_FIELDS:
            problems.add(None, label(str(name)), f"unknown setting{_did_you_mean(str(name), list(_SETTING_FIELDS))}")
            continue
        try:
            values[name] = _convert_setting(name, value, env, base)
        except _Invalid as exc:
            problems.add(None, label(name), str(exc))
    return values


def _file_settings(raw: Any, env: Mapping[str, str], problems: _Problems, base: Path | None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(None, "manifold", f"must be a mapping of settings, not {_kind(raw)}")
        return {}
    expanded = {}
    for name, value in raw.items():
        if value is None:  # null means "not set"
            continue
        try:
            expanded[name] = _expand_tree(value, env, str(name))
        except _Invalid as exc:
            problems.add(None, exc.path or str(name), str(exc))
    return _settings_layer(expanded, problems, lambda name: name, env, base)


def _env_settings(env: Mapping[str, str], problems: list[ConfigProblem]) -> dict[str, Any]:
    # An empty variable counts as unset, as `MANIFOLD_PORT=` in a compose file usually means.
    raw = {name: env[env_var(name)] for name in _SETTING_FIELDS if env.get(env_var(name), "").strip()}
    return _settings_layer(raw, _Problems(ENVIRONMENT, problems), env_var, env)


def _override_settings(
    overrides: Mapping[str, Any] | None, env: Mapping[str, str], problems: list[ConfigProblem]
) -> dict[str, Any]:
    raw = {name: value for name, value in (overrides or {}).items() if value is not None}
    return _settings_layer(raw, _Problems(COMMAND_LINE, problems), lambda name: name, env)


# --- files -------------------------------------------------------------------------------------


class _DuplicateCheckingLoader(yaml.SafeLoader):
    """A safe YAML loader that records duplicate mapping keys instead of silently keeping the last."""

    duplicates: list[str]


def _construct_mapping(loader: _DuplicateCheckingLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            if key_node.value in seen:
                line = key_node.start_mark.line + 1
                loader.duplicates.append(f"duplicate key {key_node.value!r} at line {line}")
            seen.add(key_node.value)
    return loader.construct_mapping(node, deep=True)


_DuplicateCheckingLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str) -> tuple[Any, list[str]]:
    loader = _DuplicateCheckingLoader(text)
    loader.duplicates = []
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return None, [f"invalid YAML{where}: {exc.problem or exc.context}"]
    except yaml.YAMLError as exc:
        return None, [f"invalid YAML: {exc}"]
    finally:
        loader.dispose()
    return data, loader.duplicates


def _parse_json(text: str) -> tuple[Any, list[str]]:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                duplicates.append(f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        return None, [f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]
    return data, duplicates


def _read_file(path: Path) -> tuple[Any, list[ConfigProblem]]:
    """Read and parse a config file; problems instead of exceptions, with line/column when parsing fails."""
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        return None, [
            ConfigProblem(source, None, None, f"unsupported file type {path.suffix!r}: use .json, .yaml or .yml")
        ]
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate the BOM some Windows editors write
    except FileNotFoundError:
        return None, [ConfigProblem(source, None, None, "file not found")]
    except IsADirectoryError:
        return None, [ConfigProblem(source, None, None, "is a directory, not a config file")]
    except UnicodeDecodeError as exc:
        return None, [ConfigProblem(source, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return None, [ConfigProblem(source, None, None, f"cannot read: {exc.strerror or exc}")]
    data, messages = _parse_json(text) if suffix == ".json" else _parse_yaml(text)
    return data, [ConfigProblem(source, None, None, message) for message in messages]


def read_config_data(path: str | Path) -> Any:
    """The parsed content of a JSON or YAML file; `ConfigError` if it is missing or does not parse."""
    data, problems = _read_file(Path(path))
    if problems:
        raise ConfigError(problems)
    return data


# --- the whole config --------------------------------------------------------------------------


@dataclass
class Config:
    """A checked configuration: the servers in file order (disabled ones included) and the settings."""

    servers: dict[str, ServerConfig]
    settings: Settings
    path: Path | None = None

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}


def _build(
    data: Any,
    source: str,
    env: Mapping[str, str] | None,
    overrides: Mapping[str, Any] | None,
    base: Path | None = None,
) -> tuple[Config, list[ConfigProblem]]:
    """Check everything and build what can be built; the config is only valid when there are no problems."""
    env = os.environ if env is None else env
    problems: list[ConfigProblem] = []
    in_file = _Problems(source, problems)
    if data is None:  # an empty YAML file
        data = {}
    if not isinstance(data, Mapping):
        in_file.add(None, None, f"the top level must be a mapping with 'mcpServers', not {_kind(data)}")
        data = {}
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            in_file.add(None, str(key), f"unknown top-level key{_did_you_mean(str(key), TOP_LEVEL_KEYS)}")
    servers = _parse_servers(data.get("mcpServers"), env, in_file)
    layers = [
        (in_file, "search_models", _file_settings(data.get("manifold"), env, in_file, base)),
        (_Problems(ENVIRONMENT, problems), env_var("search_models"), _env_settings(env, problems)),
        (_Problems(COMMAND_LINE, problems), "search_models", _override_settings(overrides, env, problems)),
    ]
    values = {"data_dir": default_data_dir(env)}
    for _, _, layer in layers:
        values.update(layer)
    settings = Settings(**values)
    if settings.search_models and settings.search_embedder != "hybrid":
        # Reported where search_models was set last, the value that wins.
        where, label, _ = next(layer for layer in reversed(layers) if "search_models" in layer[2])
        embedder = settings.search_embedder
        where.add(None, label, f"is only used with search_embedder 'hybrid', but search_embedder is {embedder!r}")
    return Config(servers=servers, settings=settings), problems


def parse_config_data(
    data: Mapping[str, Any],
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Like `load_config` for already-parsed data; `source` names it in problems."""
    config, problems = _build(data, source, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def _load(
    path: str | Path | None, env: Mapping[str, str] | None, overrides: Mapping[str, Any] | None
) -> tuple[Config, list[ConfigProblem]]:
    if path is None:
        return _build({}, "<no config file>", env, overrides)
    path = Path(path)
    data, file_problems = _read_file(path)
    # Keep going after a broken file so environment and flag problems are reported in the same pass.
    config, problems = _build(data, str(path), env, overrides, base=path.expanduser().absolute().parent)
    config.path = path
    return config, file_problems + problems


def load_config(
    path: str | Path | None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load, expand and check a config file; `ConfigError` lists every problem.

    `path` None gives no servers and settings from `env` (default `os.environ`) and `overrides`
    (CLI flags by setting name; None values are ignored).
    """
    config, problems = _load(path, env, overrides)
    if problems:
        raise ConfigError(problems)
    return config


def check_config(path: str | Path | None, *, env: Mapping[str, str] | None = None) -> list[ConfigProblem]:
    """Every problem `load_config` would raise, as a list; empty when the config is fine."""
    return _load(path, env, None)[1]


__all__ = [
    "CONFIG_SUFFIXES",
    "SERVER_FIELDS",
    "SURFACE_NAMES",
    "Config",
    "ServerConfig",
    "SettingField",
    "Settings",
    "ToolFilter",
    "Transport",
    "check_config",
    "default_data_dir",
    "env_var",
    "escape_vars",
    "expand_vars",
    "load_config",
    "parse_config_data",
    "read_config_data",
    "redact_args",
    "redact_url",
    "settings_fields",
]


_MIN_SECRET = 4  # shorter values are too likely to be ordinary words inside an error message


def secret_values(config: ServerConfig) -> list[str]:
    """Values that must never be shown: env and header values (and the token of `Bearer <token>`),
    and whatever `redacted()` hides in the arguments and the URL."""
    values: set[str] = set(config.env.values())
    for value in config.headers.values():
        values.add(value)
        values.add(value.rpartition(" ")[2])
    for original, shown in zip(config.args, redact_args(config.args), strict=True):
        if original == shown:
            continue
        if shown == _HIDDEN or shown.endswith(f"={_HIDDEN}"):
            values.add(original.partition("=")[2] or original)  # a value hidden whole
        for url in _URL_IN_ARG.findall(original):
            values.update(_url_secrets(url))  # and the parts a URL argument hides
    if config.url:
        values.update(_url_secrets(config.url))
    # Longest first, so a token inside a longer secret does not leave the rest showing.
    return sorted((value for value in values if len(value) >= _MIN_SECRET), key=len, reverse=True)


def _url_secrets(url: str) -> set[str]:
    """The parts of `url` that `redact_url` hides: the userinfo secret and secret-named query values."""
    original, shown = urlsplit(url), urlsplit(redact_url(url))
    secrets = set()
    if original.netloc != shown.netloc:
        userinfo = original.netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        secrets.add(unquote(password or user))
        secrets.add(password or user)
    for pair, hidden in zip(original.query.split("&"), shown.query.split("&"), strict=False):
        if pair != hidden:
            value = pair.partition("=")[2]
            secrets.update({value, unquote(value)})
    return secrets
